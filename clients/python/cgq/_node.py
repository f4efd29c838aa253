"""_node: a client node, the process side of cgq's node protocol for studies.

A study's trials run in the caller's own process (study.ask() ... study.tell()).
To the coordinator that process is a node of kind NODE_CLIENT attached to one
job: it says Hello, heartbeats, gets Assigns, sends Progress and Results and
keeps each Result until it is acked, exactly as cgq-worker does
(docs/protocol.md), so a study has the queue's guarantees: a trial asked by a
process that dies goes back to the queue, a result is recorded once however
often it is sent, and a coordinator restart adopts what the client holds.

What a client adds is `want`: how many tasks it wants to hold now (those it
holds plus the asks that wait). The coordinator assigns a client trial only
while the node holds fewer than that, so no trial is started that nobody asked
for. A Heartbeat carrying the new `want` goes out when an ask starts waiting
and before each Result (so the slot the Result frees is not filled).

One background thread owns the ZeroMQ socket; the API's threads talk to it
through a lock, a condition and a wake-up pipe.
"""

import collections
import json
import os
import random
import select
import socket
import threading
import time

WIRE_VERSION = 1
RESEND_S = 5.0       # an unacked Result is sent again this often (node/link.c)
HELLO_EVERY_S = 1.0  # a Hello is repeated until a Welcome comes
SILENT_HBS = 5       # heartbeats of silence before the socket is reopened
MAX_WANT = 1024      # the coordinator's NODES_MAX_TASKS
FINISHED_KEEP = 8192 # tasks ended here that a repeated Assign is checked against


def _pb():
    from ._proto import pb2
    return pb2()


class Task:
    """One attempt of one client trial held by this node."""

    __slots__ = ("job", "trial", "stage", "attempt", "params", "timeout_s", "deadline",
                 "claimed", "stopped", "expired", "seq", "started")

    def __init__(self, a, now):
        self.job = a.task.job
        self.trial = a.task.trial
        self.stage = a.task.stage
        self.attempt = a.task.attempt
        try:
            self.params = json.loads(a.params_json) if a.params_json else {}
        except ValueError:
            self.params = {}
        self.timeout_s = a.timeout_ms / 1000.0 if a.timeout_ms else None
        self.deadline = None
        self.claimed = False
        self.stopped = None   # the coordinator's Stop reason
        self.expired = False  # not told in time: given back to the queue
        self.seq = 0
        self.started = now

    @property
    def key(self):
        return (self.job, self.trial, self.stage, self.attempt)


class NodeError(Exception):
    """The coordinator refused this client (its Bye says why)."""


class ClientNode:
    """A client node attached to job `job` at the coordinator node endpoints
    `endpoints` (the first is tried first; after SILENT_HBS heartbeats of
    silence the next one). `curve` is (public, secret, server_public) as z85
    bytes, or None."""

    def __init__(self, endpoints, node_id, job, curve=None, version="cgq-python", prefetch=0):
        import zmq
        self._zmq = zmq
        self._pb = _pb()
        if isinstance(endpoints, str):
            endpoints = [e.strip() for e in endpoints.split(",") if e.strip()]
        if not endpoints:
            raise ValueError("no coordinator node endpoint (set CGQ_COORDINATOR_NODES or "
                             "Client(nodes=...), e.g. tcp://host:7700)")
        self.endpoints = list(endpoints)
        self.node_id = node_id
        self.job = int(job)
        # Tasks to hold ready ahead of the asks (0: none; a trial starts only
        # when asked for).
        self.prefetch = max(0, min(int(prefetch), MAX_WANT))
        self.curve = curve
        self.version = version
        self.instance = random.getrandbits(63) or 1
        self.hostname = socket.gethostname()
        self._ctx = zmq.Context.instance()
        self._sock = None
        self._ep = 0
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._held = {}       # key -> Task
        self._unclaimed = []  # keys, in the order assigned
        self._waiting = 0     # asks that wait for a task
        self._unacked = {}    # key -> [Result, last sent]
        # Tasks ended here (told, stopped unasked, given back), newest last: an
        # Assign of one again (the coordinator repeats an Assign that three
        # heartbeats have not seen) is not a new task. Bounded: FINISHED_KEEP.
        self._finished = collections.OrderedDict()
        self._out = []        # envelopes to send, in order
        self._welcomed = False
        self._epoch = 0
        self._hb_s = 1.0
        self._assign_epoch = 0
        self._assign_seq = 0
        self._last_rx = 0.0
        self._last_hello = 0.0
        self._next_hb = 0.0
        self._draining = False
        self._stop = False
        self.bye = None       # the coordinator's refusal, if any
        self.welcomes = 0     # Welcomes received (a test reads it)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._thread = threading.Thread(target=self._run, name="cgq-client-node", daemon=True)
        self._thread.start()

    # --- called from the API's threads (the lock is not held) -------------

    def want(self):
        # (lock held) What it works on, plus the larger of what it has ready
        # and what the waiting asks and the prefetch call for.
        free = len(self._unclaimed)
        claimed = len(self._held) - free
        return min(MAX_WANT, claimed + max(free, self._waiting + self.prefetch))

    def _wake(self):
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass

    def ask(self, wait=None, timeout=None, should_end=None):
        """Wait for a task and claim it. Returns the Task; None when
        should_end() says so (checked every half second) or after `wait`
        seconds. Raises NodeError if the coordinator refused this client."""
        end = None if wait is None else time.monotonic() + wait
        got = None
        with self._cv:
            self._check_bye()
            self._waiting += 1
            try:
                if not self._unclaimed:
                    self._queue_heartbeat()
                # should_end (a Redis read) is asked soon, then every 0.5 s:
                # not at each wake-up (every message from the coordinator).
                check = time.monotonic() + 0.05
                while not self._unclaimed:
                    self._check_bye()
                    now = time.monotonic()
                    if end is not None and now >= end:
                        return None
                    if should_end is not None and now >= check:
                        check = now + 0.5
                        self._lock.release()
                        try:
                            done = should_end()
                        finally:
                            self._lock.acquire()
                        if done and not self._unclaimed:
                            return None
                        continue
                    self._cv.wait(min(check, end if end is not None else check) - now)
                t = self._held[self._unclaimed.pop(0)]
                t.claimed = True
                limit = timeout if timeout is not None else t.timeout_s
                now = time.monotonic()
                t.started = now
                t.deadline = now + limit if limit else None
                got = t
                return t
            finally:
                self._waiting -= 1  # before the want below is computed
                if got is None:
                    self._queue_heartbeat()  # the ask ended unanswered: want shrinks
                elif self.prefetch:
                    self._queue_heartbeat()  # one fewer ready: the coordinator refills

    def report(self, t, report_json):
        pb = self._pb
        with self._cv:
            self._check_held(t)
            t.seq += 1
            env = pb.Envelope(version=WIRE_VERSION)
            env.progress.task.CopyFrom(self._ref(t))
            env.progress.report_json = report_json
            env.progress.seq = t.seq
            self._out.append(env)
        self._wake()

    def should_stop(self, t):
        with self._cv:
            return t.stopped is not None

    def finish(self, t, status, metrics_json="{}", error="", reports=0):
        """Ends t with a Result (kept until acked). status: a TaskStatus."""
        pb = self._pb
        with self._cv:
            self._check_held(t)
            if t.stopped is not None:
                status = pb.TASK_STOPPED
            # The heartbeat with the smaller want goes first and still lists
            # t: the slot the Result frees is not given to anyone.
            del self._held[t.key]
            want = self.want()
            self._held[t.key] = t
            self._queue_heartbeat(want)
            del self._held[t.key]
            self._ended(t.key)
            r = pb.Result(status=status, metrics_json=metrics_json, error=error,
                          duration_s=max(0.0, time.monotonic() - t.started), reports=reports)
            r.task.CopyFrom(self._ref(t))
            env = pb.Envelope(version=WIRE_VERSION)
            env.result.CopyFrom(r)
            self._out.append(env)
            self._unacked[t.key] = [r, time.monotonic()]
        self._wake()

    def unacked(self):
        with self._cv:
            return len(self._unacked)

    def close(self, wait_acks=10.0):
        """Gives back what is held (unclaimed tasks, asked ones not told),
        waits up to wait_acks seconds for the Acks of the results, says Bye."""
        if self._stop:
            return
        with self._cv:
            self._draining = True
            end = time.monotonic() + wait_acks
            while self._unacked and self.bye is None:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._queue_heartbeat()
                self._cv.wait(min(left, 0.5))
            env = self._pb.Envelope(version=WIRE_VERSION)
            env.bye.reason = "client closed"
            self._out.append(env)
            self._stop = True
        self._wake()
        self._thread.join(5)
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    # --- helpers (lock held) ------------------------------------------------

    def _check_bye(self):
        if self.bye is not None:
            raise NodeError(self.bye)

    def _check_held(self, t):
        if t.expired:
            raise NodeError("trial %d (attempt %d) was not told within its timeout of %gs and "
                            "went back to the queue: it runs again as a later attempt"
                            % (t.trial, t.attempt, t.timeout_s or 0))
        if self._held.get(t.key) is not t:
            raise NodeError("trial %d (attempt %d) is not held by this study any more"
                            % (t.trial, t.attempt))

    def _ended(self, key):
        self._finished[key] = True
        if len(self._finished) > FINISHED_KEEP:
            self._finished.popitem(last=False)

    def _ref(self, t):
        r = self._pb.TaskRef(job=t.job, trial=t.trial, stage=t.stage, attempt=t.attempt)
        return r

    def _heartbeat_env(self, want=None):
        env = self._pb.Envelope(version=WIRE_VERSION)
        hb = env.heartbeat
        for t in self._held.values():
            hb.running.add().CopyFrom(self._ref(t))
        hb.epoch = self._epoch
        hb.assign_epoch = self._assign_epoch
        hb.assign_seq = self._assign_seq
        hb.draining = self._draining
        hb.want = 0 if self._draining else (self.want() if want is None else want)
        return env

    def _queue_heartbeat(self, want=None):
        if self._welcomed:
            self._out.append(self._heartbeat_env(want))
            self._wake()

    # --- the thread -----------------------------------------------------------

    def _open(self):
        zmq = self._zmq
        if self._sock is not None:
            self._sock.close(0)
        s = self._ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.ROUTING_ID, self.node_id.encode())
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RECONNECT_IVL, 100)
        s.setsockopt(zmq.RECONNECT_IVL_MAX, 2000)
        if self.curve:
            pub, sec, server = self.curve
            s.curve_publickey = pub
            s.curve_secretkey = sec
            s.curve_serverkey = server
        s.connect(self.endpoints[self._ep % len(self.endpoints)])
        self._sock = s
        self._welcomed = False
        self._last_rx = time.monotonic()
        self._last_hello = 0.0

    def _send(self, env):
        try:
            self._sock.send(env.SerializeToString(), self._zmq.DONTWAIT)
        except self._zmq.Again:
            pass  # no connection yet: Hello, heartbeats and results are sent again

    def _hello(self, now):
        env = self._pb.Envelope(version=WIRE_VERSION)
        h = env.hello
        h.node_id = self.node_id
        h.kind = self._pb.NODE_CLIENT
        h.job = self.job
        h.want = 0 if self._draining else self.want()
        h.hostname = self.hostname
        h.pid = os.getpid()
        h.version = self.version
        h.instance = self.instance
        h.assign_epoch = self._assign_epoch
        h.assign_seq = self._assign_seq
        for t in self._held.values():
            h.running.add().CopyFrom(self._ref(t))
        for u in self._unacked.values():
            h.unacked.add().CopyFrom(u[0])
            u[1] = now
        self._send(env)
        self._last_hello = now

    def _run(self):
        try:
            self._loop()
        except Exception as e:  # a defect: say so to every waiting call, never hang them
            with self._cv:
                self.bye = "the client node's thread stopped: %s: %s" % (type(e).__name__, e)
                self._stop = True
                self._cv.notify_all()
            raise

    def _loop(self):
        zmq = self._zmq
        poller = None
        with self._cv:
            self._open()
        while True:
            with self._cv:
                if poller is None or poller.sock is not self._sock:
                    poller = zmq.Poller()
                    poller.register(self._sock, zmq.POLLIN)
                    poller.register(self._wake_r, zmq.POLLIN)
                    poller.sock = self._sock
                out, self._out = self._out, []
                if self._welcomed:
                    for env in out:
                        self._send(env)
                stop = self._stop
                timeout = self._timers(time.monotonic())
            if stop:
                with self._cv:
                    self._sock.close(1000)
                    self._sock = None
                    self._cv.notify_all()
                return
            events = dict(poller.poll(int(timeout * 1000) + 1))
            if self._wake_r in events:
                try:
                    while os.read(self._wake_r, 4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
            if self._sock in events:
                while True:
                    try:
                        data = self._sock.recv(zmq.DONTWAIT)
                    except zmq.Again:
                        break
                    with self._cv:
                        self._last_rx = time.monotonic()
                        self._handle(data)
                        self._cv.notify_all()

    def _timers(self, now):
        """Runs what is due; returns the seconds until the next thing is."""
        if not self._welcomed:
            if now - self._last_rx > max(SILENT_HBS * self._hb_s, 2.0) and len(self.endpoints) > 1:
                self._ep += 1
                self._open()
            if now - self._last_hello >= HELLO_EVERY_S and self.bye is None:
                self._hello(now)
            return max(0.01, self._last_hello + HELLO_EVERY_S - now)
        if now - self._last_rx > SILENT_HBS * self._hb_s:
            # Silence: a new socket (to the next endpoint, if several), Hello again.
            self._ep += 1
            self._open()
            self._hello(now)
            return HELLO_EVERY_S
        # Asked trials not told in time go back to the queue: the next
        # heartbeat no longer lists them, which the coordinator reads as lost.
        expired = False
        for t in list(self._held.values()):
            if t.claimed and t.deadline is not None and now >= t.deadline:
                t.expired = True
                del self._held[t.key]
                self._ended(t.key)
                expired = True
        if expired:
            self._cv.notify_all()
        if now >= self._next_hb or expired:
            self._send(self._heartbeat_env())
            self._next_hb = now + self._hb_s
        nxt = self._next_hb
        for key, u in self._unacked.items():
            if now - u[1] >= RESEND_S:
                env = self._pb.Envelope(version=WIRE_VERSION)
                env.result.CopyFrom(u[0])
                self._send(env)
                u[1] = now
            nxt = min(nxt, u[1] + RESEND_S)
        for t in self._held.values():
            if t.claimed and t.deadline is not None:
                nxt = min(nxt, t.deadline)
        return max(0.001, nxt - now)

    def _handle(self, data):
        pb = self._pb
        env = pb.Envelope()
        try:
            env.ParseFromString(data)
        except Exception:
            return
        if env.version != WIRE_VERSION:
            return
        body = env.WhichOneof("body")
        now = time.monotonic()
        if body == "welcome":
            w = env.welcome
            self._welcomed = True
            self.welcomes += 1
            self._epoch = w.epoch
            if w.heartbeat_ms:
                self._hb_s = w.heartbeat_ms / 1000.0
            self._next_hb = now + self._hb_s
            # What waited for the Welcome: a heartbeat with the current want.
            self._send(self._heartbeat_env())
        elif body == "heartbeat":
            hb = env.heartbeat
            if hb.unknown or (self._welcomed and hb.epoch != self._epoch):
                self._welcomed = False
                self._hello(now)
        elif body == "assign":
            self._assign(env.assign, now)
        elif body == "assign_batch":
            for a in env.assign_batch.assigns:
                self._assign(a, now)
        elif body == "ack":
            for r in env.ack.tasks:
                self._unacked.pop((r.job, r.trial, r.stage, r.attempt), None)
        elif body == "stop":
            r = env.stop.task
            t = self._held.get((r.job, r.trial, r.stage, r.attempt))
            if t is not None:
                t.stopped = env.stop.reason or "stopped"
                if not t.claimed:
                    # Nobody works on it yet: it ends here, as stopped.
                    self._unclaimed.remove(t.key)
                    del self._held[t.key]
                    self._ended(t.key)
                    res = pb.Result(status=pb.TASK_STOPPED, metrics_json="{}")
                    res.task.CopyFrom(r)
                    out = pb.Envelope(version=WIRE_VERSION)
                    out.result.CopyFrom(res)
                    self._send(out)
                    self._unacked[t.key] = [res, now]
        elif body == "bye":
            self.bye = env.bye.reason or "the coordinator said Bye"

    def _assign(self, a, now):
        pb = self._pb
        if a.epoch > self._assign_epoch:
            self._assign_epoch, self._assign_seq = a.epoch, a.seq
        elif a.epoch == self._assign_epoch and a.seq > self._assign_seq:
            self._assign_seq = a.seq
        key = (a.task.job, a.task.trial, a.task.stage, a.task.attempt)
        if key in self._held or key in self._unacked or key in self._finished:
            return  # the same Assign again (sent once more after a reconnect)
        if a.kind != "client" or a.task.job != self.job:
            res = pb.Result(status=pb.TASK_LOST, metrics_json="{}",
                            error="a client node runs its study's client trials only")
            res.task.CopyFrom(a.task)
            out = pb.Envelope(version=WIRE_VERSION)
            out.result.CopyFrom(res)
            self._send(out)
            self._unacked[key] = [res, now]
            return
        t = Task(a, now)
        self._held[key] = t
        self._unclaimed.append(key)
