"""beanstalk_peer: beanstalkd as a peer queue of `make bench`, with a client of
our own (Python 3 stdlib: sockets and the beanstalk text protocol).

Two roles:

  library   bench/run imports it: Client (put, reserve, delete, use, watch,
            pause-tube, stats-tube) and drive(), one timed run;
  consumer  `python3 beanstalk_peer.py consume --port P --tube T` is one
            consumer connection, run in several processes at once so that the
            Python side is not the only thing measured. It prints "ready" once
            its first reserve is sent, then reserves, "runs" (the job body is
            {"x": float}; the outcome {x, score} is computed and dropped:
            beanstalkd has no result store) and deletes until it reserves a
            stop job; then it prints one JSON line: its count and the
            CLOCK_MONOTONIC time of its last DELETED reply.

A job is done when its delete is acknowledged; with beanstalkd's binlog on
(-b DIR), the put and the delete are written to the log (fsync at most every
50 ms, beanstalkd's default), so the outcome "done" survives a restart.

drive() modes (see bench/README.md):

  e2e    the consumers are connected and blocked in reserve; time from the
         first put until the last consumer's last DELETED (the N puts are
         pipelined in chunks of `chunk` commands on one producer connection);
  drain  the tube is paused (pause-tube) while the N jobs are put, the
         consumers connect and block; time from pause-tube T 0 until the
         last DELETED.
"""

import json
import os
import random
import socket
import subprocess
import sys
import time

STOP = b"stop"
JOB_PRI = 1024           # beanstalkd's usual default priority
STOP_PRI = 2 ** 32 - 1   # served after every job (lower number = sooner)
TTR = 60


class BeanstalkError(Exception):
    pass


class Client:
    """One connection; commands may be pipelined with send() / expect()."""

    def __init__(self, port, host="127.0.0.1", timeout=30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise BeanstalkError("beanstalkd closed the connection")
        self.buf += chunk

    def line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                out, self.buf = self.buf[:i], self.buf[i + 2:]
                return out
            self._fill()

    def body(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        out, self.buf = self.buf[:n], self.buf[n + 2:]
        return out

    def expect(self, word):
        got = self.line()
        if got.split(b" ", 1)[0] != word:
            raise BeanstalkError("expected %s, got %r" % (word.decode(), got))
        return got

    def cmd(self, text, word):
        self.send(text.encode() + b"\r\n")
        return self.expect(word)

    def yaml_dict(self, text):
        """stats-tube and friends: OK <bytes> then a flat YAML mapping."""
        head = self.cmd(text, b"OK")
        raw = self.body(int(head.split()[1])).decode()
        out = {}
        for ln in raw.splitlines():
            if ": " in ln:
                k, v = ln.split(": ", 1)
                out[k.strip()] = v.strip()
        return out

    @staticmethod
    def put_cmd(body, pri=JOB_PRI, delay=0, ttr=TTR):
        return b"put %d %d %d %d\r\n%s\r\n" % (pri, delay, ttr, len(body), body)


def put_many(cl, bodies, chunk, pri=JOB_PRI):
    """Puts every body, pipelined: chunk commands sent, then chunk INSERTED read."""
    for i in range(0, len(bodies), chunk):
        part = bodies[i:i + chunk]
        cl.send(b"".join(Client.put_cmd(b, pri) for b in part))
        for _ in part:
            cl.expect(b"INSERTED")


def consume(port, tube, timeout):
    """One consumer connection; see the module's docstring."""
    cl = Client(port, timeout=timeout + 30)
    cl.cmd("watch %s" % tube, b"WATCHING")
    cl.cmd("ignore default", b"WATCHING")
    reserve = b"reserve-with-timeout 1\r\n"
    cl.send(reserve)
    print("ready", flush=True)
    count = 0
    t_first = t_last = None
    deadline = time.monotonic() + timeout
    while True:
        head = cl.line()
        if head == b"TIMED_OUT":
            if time.monotonic() > deadline:
                break
            cl.send(reserve)
            continue
        if not head.startswith(b"RESERVED "):
            raise BeanstalkError("expected RESERVED, got %r" % head)
        _, jid, nbytes = head.split()
        body = cl.body(int(nbytes))
        if body == STOP:
            cl.send(b"delete %s\r\n" % jid)
            cl.expect(b"DELETED")
            break
        if t_first is None:
            t_first = time.monotonic()
        x = json.loads(body)["x"]
        json.dumps({"x": x, "score": x})  # the outcome, as the other peers compute it
        # the delete and the next reserve in one write (pipelined)
        cl.send(b"delete %s\r\n" % jid + reserve)
        cl.expect(b"DELETED")
        t_last = time.monotonic()
        count += 1
    cl.close()
    print(json.dumps({"count": count, "t_first": t_first, "t_last": t_last}), flush=True)


def server_argv(port, binlog_dir):
    return ["beanstalkd", "-l", "127.0.0.1", "-p", str(port), "-b", binlog_dir]


def drive(port, mode, n, consumers, seed, timeout, chunk=1000, procs=None):
    """One timed run on the beanstalkd at 127.0.0.1:port, tube bench-<seed>.
    Starts `consumers` consumer processes (their PIDs are appended to procs,
    a list the caller may use to stop them) and stops each of them by PID on
    every way out. Returns the same figures as the other peers' drivers."""
    tube = "bench-%d" % seed
    rnd = random.Random(seed)
    bodies = [json.dumps({"x": rnd.random()}).encode() for _ in range(n)]
    prod = Client(port, timeout=timeout + 30)
    prod.cmd("use %s" % tube, b"USING")
    enqueue_s = None
    if mode == "drain":
        prod.cmd("pause-tube %s %d" % (tube, int(timeout) + 60), b"PAUSED")
        t = time.monotonic()
        put_many(prod, bodies, chunk)
        enqueue_s = time.monotonic() - t  # untimed in this mode
        put_many(prod, [STOP] * consumers, chunk, STOP_PRI)
    procs = procs if procs is not None else []
    mine = []
    argv = [sys.executable, os.path.abspath(__file__), "consume", "--port", str(port),
            "--tube", tube, "--timeout", str(timeout)]
    try:
        for _ in range(consumers):
            # a session of its own: a Ctrl-C reaches bench/run only, which
            # stops the consumers by PID (below)
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 text=True, start_new_session=True)
            mine.append(p)
            procs.append(p)
        for p in mine:
            if p.stdout.readline().strip() != "ready":
                raise BeanstalkError("a consumer exited before it was ready (exit %s)" % p.wait())
        time.sleep(0.05)  # let their reserves reach the server
        t0 = time.monotonic()
        if mode == "drain":
            prod.cmd("pause-tube %s 0" % tube, b"PAUSED")
        else:
            put_many(prod, bodies, chunk)
            enqueue_s = time.monotonic() - t0
            put_many(prod, [STOP] * consumers, chunk, STOP_PRI)
        outs = []
        for p in mine:
            line = p.stdout.readline()
            rc = p.wait(timeout + 30)
            if rc != 0 or not line.strip():
                raise BeanstalkError("a consumer exited %s without its figures" % rc)
            outs.append(json.loads(line))
        stats = prod.yaml_dict("stats-tube %s" % tube)
    finally:
        for p in mine:
            if p.poll() is None:
                p.kill()
                p.wait(10)
            p.stdout.close()
            if p in procs:
                procs.remove(p)
        prod.close()
    done = sum(o["count"] for o in outs)
    lasts = [o["t_last"] for o in outs if o["t_last"] is not None]
    wall = (max(lasts) - t0) if lasts else 0.0
    left = sum(int(stats.get(k, 0)) for k in ("current-jobs-ready", "current-jobs-reserved",
                                              "current-jobs-delayed", "current-jobs-buried"))
    error = None
    if done != n or left:
        error = "%d of %d jobs deleted; left in the tube: %s" % (done, n, {
            k: v for k, v in stats.items() if k.startswith("current-jobs")})
    return {"mode": mode, "n": n, "succeeded": done, "wall": wall,
            "tps": done / wall if wall > 0 else 0.0, "enqueue_s": enqueue_s,
            "done": error is None, "error": error,
            "per_consumer": [o["count"] for o in outs]}


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="beanstalkd peer: one consumer connection")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("consume")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--tube", required=True)
    c.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args(argv)
    try:
        consume(a.port, a.tube, a.timeout)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
