"""fakerunner: a device runner in Python (stdlib only) that speaks cgq's wire
protocol to a real coordinator, so that the coordinator's device queues are
tested over real sockets on their own: it records every Assign it gets with
its device and the start and end of each "measurement", and notes any Assign
for a device that is still busy (which the coordinator must never send).

Just enough of ZMTP 3.0 (NULL mechanism, DEALER) and of the protobuf wire
format (schemas/cgq.proto field numbers) to do that. Not a template for a
runner: the real one is cgq-device-runner (device-runner/).
"""

import json
import os
import socket
import struct
import threading
import time

# ---------------------------------------------------------------- protobuf


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, wire, payload):
    return _varint((num << 3) | wire) + payload


def pb_int(num, n):
    return _field(num, 0, _varint(n)) if n else b""


def pb_bytes(num, data):
    if isinstance(data, str):
        data = data.encode()
    return _field(num, 2, _varint(len(data)) + data)


def pb_double(num, v):
    return _field(num, 1, struct.pack("<d", v))


def pb_decode(data):
    """Decodes one message into {field number: [values]} (ints or bytes)."""
    out, i = {}, 0
    while i < len(data):
        key, i = _read_varint(data, i)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _read_varint(data, i)
        elif wire == 1:
            v, i = data[i:i + 8], i + 8
        elif wire == 2:
            n, i = _read_varint(data, i)
            v, i = data[i:i + n], i + n
        elif wire == 5:
            v, i = data[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        out.setdefault(num, []).append(v)
    return out


def _read_varint(data, i):
    shift = n = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        if not b & 0x80:
            return n, i
        shift += 7


def _one(m, num, default=None):
    v = m.get(num)
    return v[0] if v else default


# Envelope body field numbers (schemas/cgq.proto).
HELLO, WELCOME, HEARTBEAT, ASSIGN, RESULT, ACK, STOP = 10, 11, 12, 13, 15, 16, 17
NODE_DEVICE_RUNNER = 1
TASK_SUCCEEDED, TASK_FAILED, TASK_TIMEOUT, TASK_STOPPED = 0, 1, 2, 3


def envelope(body_num, body):
    return pb_int(1, 1) + pb_bytes(body_num, body)


def task_ref(job, trial, attempt):
    return pb_int(1, job) + pb_int(2, trial) + pb_int(4, attempt)


# ---------------------------------------------------------------- ZMTP


class Zmtp:
    """A DEALER connection to a ZeroMQ ROUTER: one frame per message."""

    def __init__(self, host, port, identity):
        self.s = socket.create_connection((host, port), 5)
        self.s.sendall(b"\xff" + b"\x00" * 7 + b"\x01\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") +
                       b"\x00" + b"\x00" * 31)
        self._exact(64)

        def prop(name, value):
            return bytes([len(name)]) + name + struct.pack(">I", len(value)) + value

        body = b"\x05READY" + prop(b"Socket-Type", b"DEALER") + prop(b"Identity", identity)
        self.s.sendall(b"\x04" + bytes([len(body)]) + body)
        self.lock = threading.Lock()

    def _exact(self, n):
        got = b""
        while len(got) < n:
            c = self.s.recv(n - len(got))
            if not c:
                raise ConnectionError("coordinator closed the connection")
            got += c
        return got

    def send(self, data):
        with self.lock:
            if len(data) > 255:
                self.s.sendall(b"\x02" + struct.pack(">Q", len(data)) + data)
            else:
                self.s.sendall(b"\x00" + bytes([len(data)]) + data)

    def recv(self):
        """The next message (its frames joined), skipping ZMTP commands."""
        parts = []
        while True:
            flags = self._exact(1)[0]
            size = struct.unpack(">Q", self._exact(8))[0] if flags & 0x02 else self._exact(1)[0]
            data = self._exact(size)
            if flags & 0x04:
                continue  # READY, PING: nothing to do
            parts.append(data)
            if not flags & 0x01:
                return parts

    def close(self):
        try:
            self.s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.s.close()


# ---------------------------------------------------------------- runner


class FakeRunner:
    """devices: {id: {tag: value}}. behaviour(device, assign) -> (status,
    seconds, error) says what a measurement does: how long it takes and how
    it ends. Thread-safe records: self.runs (one dict per measurement),
    self.overlaps (Assigns for a busy device)."""

    def __init__(self, endpoint, rid, devices, behaviour, heartbeat_s=0.1):
        self.rid, self.devices, self.behaviour = rid, devices, behaviour
        self.heartbeat_s = heartbeat_s
        self.lock = threading.Lock()
        self.busy = {}       # device -> (job, trial, attempt)
        self.runs = []
        self.overlaps = []
        self.unacked = {}    # (job, trial, attempt) -> encoded Result
        self.instance = int.from_bytes(os.urandom(8), "little") | 1
        self.assign_at = (0, 0)  # (epoch, seq) of the last Assign received
        self.stopped = threading.Event()
        self.welcomed = threading.Event()
        self.z = self._connect(endpoint)
        self.z.send(envelope(HELLO, self._hello()))
        self.threads = [threading.Thread(target=self._reader, daemon=True),
                        threading.Thread(target=self._beater, daemon=True)]
        for t in self.threads:
            t.start()

    def _connect(self, endpoint):
        host, port = endpoint.replace("tcp://", "").rsplit(":", 1)
        return Zmtp(host, int(port), self.rid.encode())

    def reconnect(self, endpoint):
        """Connects anew (say to a restarted coordinator) and says Hello with
        the measurements still running and the results not yet acked, as a
        runner does; measurements in progress carry on."""
        old = self.z
        self.z = self._connect(endpoint)
        old.close()
        self.z.send(envelope(HELLO, self._hello()))
        t = threading.Thread(target=self._reader, daemon=True)
        self.threads.append(t)
        t.start()

    def _hello(self):
        res = b""
        for did, tags in self.devices.items():
            dev = pb_bytes(1, did)
            for k, v in tags.items():
                dev += pb_bytes(2, pb_bytes(1, k) + pb_bytes(2, v))
            res += pb_bytes(5, dev)
        with self.lock:
            running = b"".join(pb_bytes(4, task_ref(*ref)) for ref in self.busy.values())
            unacked = b"".join(pb_bytes(5, r) for r in self.unacked.values())
            seen = pb_int(10, self.assign_at[0]) + pb_int(11, self.assign_at[1])
        return (pb_bytes(1, self.rid) + pb_int(2, NODE_DEVICE_RUNNER) + pb_bytes(3, res) + running +
                unacked + pb_bytes(6, "fakerunner") + pb_int(7, os.getpid()) +
                pb_int(9, self.instance) + seen)

    def _beater(self):
        while not self.stopped.wait(self.heartbeat_s):
            # Under the lock, so that a measurement's Result (sent under it
            # too) never falls between "not running" and "result sent": the
            # coordinator takes a task missing from a heartbeat, with its
            # Assign seen and no Result before it, as lost.
            with self.lock:
                running = b"".join(pb_bytes(1, task_ref(*ref)) for ref in self.busy.values())
                seen = pb_int(4, self.assign_at[0]) + pb_int(5, self.assign_at[1])
                try:
                    self.z.send(envelope(HEARTBEAT, running + seen))
                except OSError:
                    continue  # closed for a reconnect, or by stop()

    def _reader(self):
        z = self.z
        while not self.stopped.is_set() and z is self.z:
            try:
                parts = z.recv()
            except (OSError, ConnectionError):
                return
            env = pb_decode(parts[-1])
            if WELCOME in env:
                self.welcomed.set()
            elif ASSIGN in env:
                self._assign(pb_decode(_one(env, ASSIGN)))
            elif ACK in env:
                for r in pb_decode(_one(env, ACK)).get(1, []):
                    m = pb_decode(r)
                    with self.lock:
                        self.unacked.pop((_one(m, 1, 0), _one(m, 2, 0), _one(m, 4, 0)), None)

    def _assign(self, a):
        t = pb_decode(_one(a, 1, b""))
        ref = (_one(t, 1, 0), _one(t, 2, 0), _one(t, 4, 0))
        device = _one(a, 12, b"").decode()
        info = {"device": device, "benchmark": _one(a, 13, b"").decode(),
                "params": json.loads(_one(a, 3, b"{}").decode() or "{}"),
                "repeats": _one(a, 16, 0), "warmup": _one(a, 17, 0),
                "timeout_ms": _one(a, 10, 0), "kind": _one(a, 2, b"").decode(),
                "argv": [x.decode() for x in a.get(4, [])], "ref": ref}
        with self.lock:
            at = (_one(a, 20, 0), _one(a, 19, 0))
            if at > self.assign_at:
                self.assign_at = at
            if device not in self.devices or device in self.busy:
                self.overlaps.append(info)
                return
            self.busy[device] = ref
        threading.Thread(target=self._measure, args=(info,), daemon=True).start()

    def _measure(self, info):
        status, seconds, error = self.behaviour(info["device"], info)
        start = time.time()
        if self.stopped.wait(seconds):
            return
        end = time.time()
        metrics = {"p50": seconds * 1000, "start": start, "end": end, "device": info["device"]}
        res = (pb_bytes(1, task_ref(*info["ref"])) + pb_int(2, status) +
               pb_bytes(3, json.dumps(metrics)) + (pb_bytes(5, error) if error else b"") +
               pb_double(6, end - start))
        with self.lock:
            self.runs.append(dict(info, start=start, end=end, status=status))
            del self.busy[info["device"]]
            self.unacked[info["ref"]] = res
            try:
                self.z.send(envelope(RESULT, res))
            except OSError:
                pass

    def stop(self):
        """Goes silent at once (like a runner whose machine is lost)."""
        self.stopped.set()
        self.z.close()
        for t in self.threads:
            t.join(5)
