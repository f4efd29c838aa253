#!/usr/bin/env python3
"""Live updates: /api/events?job=ID streams cgq:events as server-sent events
from the HTTP server's own thread (XREAD BLOCK on its own connection).
Against a real cluster: a trial that finishes is on the stream within 3 s,
only the asked job's events come, heartbeats keep an idle stream alive,
the 17th stream gets 503 while 16 are open and a stream that closed frees
its place, a bad job id gets 400, and the API still answers at once while
16 streams wait (no HTTP thread is held by them); the coordinator stops
cleanly with 16 streams open; Redis restarting under an open stream: it
stays open and carries the events after."""

import http.client
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SPEED, CgqTestCase, free_port, main  # noqa: E402
from test_dashboard_api import request  # noqa: E402

GATED = r'''
import json, os, sys, time
gate, i = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 120
while not os.path.exists(gate + str(i)) and time.time() < deadline:
    time.sleep(0.05)
os.write(3, (json.dumps({"v": i}) + "\n").encode())
'''

SPEC = '''name: events-%s
space:
  i: {grid: [0, 1]}
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/gated.py {spec_dir}/gate%s {i}
  resources: {cpu: 1}
'''

MAX_STREAMS = 16
HEARTBEAT_S = 5


class Stream:
    """An open /api/events stream over a raw socket: its events as dicts."""

    def __init__(self, port, query):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(("GET /api/events%s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream"
                           "\r\n\r\n" % query).encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            self.buf += chunk
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        self.head = head.decode("latin-1")
        self.status = int(self.head.split()[1]) if self.head else 0
        self.text = ""

    def _parse(self):
        """Moves whole chunks ("<hex>\r\n<data>\r\n") from buf to text."""
        while True:
            line, sep, rest = self.buf.partition(b"\r\n")
            if not sep:
                return
            n = int(line.split(b";")[0] or b"0", 16)
            if len(rest) < n + 2:
                return
            self.text += rest[:n].decode("utf-8", "replace")
            self.buf = rest[n + 2:]

    def read_until(self, pred, timeout):
        """Reads until pred(text so far) holds; the text, or None."""
        deadline = time.monotonic() + timeout
        while True:
            self._parse()
            if pred(self.text):
                return self.text
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                return None
            if not chunk:
                return None
            self.buf += chunk

    def events(self):
        out = []
        for block in self.text.split("\n\n"):
            for line in block.split("\n"):
                if line.startswith("data: "):
                    out.append(json.loads(line[6:]))
        return out

    def close(self):
        self.sock.close()


class DashboardEventsTest(CgqTestCase):

    def test_events(self):
        c = self.cluster
        c.start_redis()
        self.port = free_port()
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        c.start_worker("w1", cpus=4)
        c.write_file("gated.py", GATED)
        a = c.submit(c.write_file("a.yaml", SPEC % ("a", "a")))
        b = c.submit(c.write_file("b.yaml", SPEC % ("b", "b")))
        for j in (a, b):
            c.wait_value(lambda: c.job(j), lambda h: h.get("running") == "2", 30,
                         "both trials of job %d to run" % j)

        status, _, body = request(self.port, "/api/events?job=x")
        self.assertEqual(status, 400, body)
        status, _, body = request(self.port, "/api/events?job=-1")
        self.assertEqual(status, 400, body)
        t0 = time.monotonic()  # HEAD: the head only, at once, and no stream held
        status, headers, body = request(self.port, "/api/events", method="HEAD")
        self.assertEqual((status, body), (200, ""))
        self.assertEqual(headers.get("content-type"), "text/event-stream")
        self.assertLess(time.monotonic() - t0, 2 * SPEED)

        s = Stream(self.port, "?job=%d" % a)
        try:
            self.assertEqual(s.status, 200, s.head)
            self.assertIn("content-type: text/event-stream", s.head.lower())
            self.assertIn("content-security-policy", s.head.lower())
            self.assertIsNotNone(s.read_until(lambda t: "retry: 2000" in t, 5), s.text)
            # Job b's trial finishes first: not on a's stream. Then a's.
            open(os.path.join(c.specdir, "gateb1"), "w").close()
            c.wait_value(lambda: c.trial(b, 1), lambda h: h.get("state") == "succeeded", 30,
                         "job %d trial 1 to succeed" % b)
            open(os.path.join(c.specdir, "gatea1"), "w").close()
            c.wait_value(lambda: c.trial(a, 1), lambda h: h.get("state") == "succeeded", 30,
                         "job %d trial 1 to succeed" % a)
            seen = time.monotonic()
            got = s.read_until(lambda t: "trial.succeeded" in t, 3 * SPEED)
            self.assertIsNotNone(got, "no trial.succeeded within 3 s: %r" % s.text)
            self.assertLess(time.monotonic() - seen, 3 * SPEED)
            evs = s.events()
            self.assertTrue(evs)
            self.assertEqual({e["job"] for e in evs}, {str(a)}, "only job %d's events" % a)
            done = [e for e in evs if e["type"] == "trial.succeeded"]
            self.assertEqual(done[0]["trials"].split(":")[0], "1")
            self.assertTrue(all(e["id"] for e in evs), "each event carries its stream id")
            # Idle: a heartbeat comes.
            n = len(s.text)
            self.assertIsNotNone(s.read_until(lambda t: ": heartbeat" in t[n:],
                                              HEARTBEAT_S + 3), s.text)
            # A hostile or huge event (a 50 KB error text, a field of bytes
            # that are not UTF-8) is cut, never stalls the stream: the
            # event after it comes too.
            c.redis.cmd("XADD", "cgq:events", "*", "type", "trial.failed", "job", str(a),
                        "trial", "7", "detail", "\u00e9" * 25000, "junk", b"\xff\xfe<img>")
            c.redis.cmd("XADD", "cgq:events", "*", "type", "trial.failed", "job", str(a),
                        "trial", "8", "detail", "x")
            got = s.read_until(lambda t: '"trial":"8"' in t, 5 * SPEED)
            self.assertIsNotNone(got, "the event after a huge one: %r" % s.text[-500:])
            big = [e for e in s.events() if e.get("trial") == "7"]
            self.assertEqual(len(big), 1)
            self.assertTrue(big[0]["truncated"])
            self.assertLessEqual(len(big[0]["detail"].encode()), 1024)
            self.assertTrue(set(big[0]["detail"]) == {"\u00e9"})
        finally:
            s.close()

        # Bounded: 16 streams at once, the 17th refused; the API still
        # answers at once meanwhile; a stream that closed frees its place.
        streams = []
        try:
            deadline = time.monotonic() + 10
            while len(streams) < MAX_STREAMS and time.monotonic() < deadline:
                x = Stream(self.port, "")
                if x.status == 200:
                    streams.append(x)
                else:  # the closed stream above may not be freed yet
                    x.close()
                    time.sleep(0.2)
            self.assertEqual(len(streams), MAX_STREAMS)
            x = Stream(self.port, "?job=%d" % a)
            self.assertEqual(x.status, 503, x.head)
            x.close()
            t0 = time.monotonic()
            status, _, body = request(self.port, "/api/jobs/%d" % a)
            self.assertEqual(status, 200, body)
            self.assertLess(time.monotonic() - t0, 1.0 * SPEED)
            # Every open stream sees a new event (b's last trial).
            open(os.path.join(c.specdir, "gateb0"), "w").close()
            for x in streams:
                self.assertIsNotNone(x.read_until(lambda t: '"job":"%d"' % b in t, 5 * SPEED),
                                     x.text)
            # The peer's close is seen at the thread's next tick (1 s),
            # not at a failed write a heartbeat or two later.
            streams.pop().close()
            deadline = time.monotonic() + 3 * SPEED
            ok = False
            while not ok and time.monotonic() < deadline:  # freed at its next write
                x = Stream(self.port, "")
                ok = x.status == 200
                (streams.append if ok else lambda y: y.close())(x)
                if not ok:
                    time.sleep(0.3)
            self.assertTrue(ok, "a closed stream's place was not freed")
            open(os.path.join(c.specdir, "gatea0"), "w").close()
            c.wait_job(a, timeout=30)
            c.wait_job(b, timeout=30)
            # The coordinator stops cleanly (SIGTERM, exit 0, in time) with
            # 16 streams open and suspended: each is ended first.
            coord = c.coordinator
            t0 = time.monotonic()
            problem = coord.stop(grace=10)
            self.assertIsNone(problem)
            self.assertEqual(coord.stopped_rc, 0)
            self.assertLess(time.monotonic() - t0, 5 * SPEED)
            for x in streams:  # each stream ended (closed by the server)
                self.assertIsNone(x.read_until(lambda t: False, 2))
        finally:
            for x in streams:
                x.close()

    def test_redis_restart(self):
        """Redis goes away under an open stream and comes back: the stream
        stays open (heartbeats) and carries the events after it."""
        c = self.cluster
        c.start_redis(appendonly=True)
        self.port = free_port()
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        c.start_worker("w1", cpus=2)
        c.write_file("gated.py", GATED)
        a = c.submit(c.write_file("a.yaml", SPEC % ("a", "a")))
        c.wait_value(lambda: c.job(a), lambda h: h.get("running") == "2", 30,
                     "both trials of job %d to run" % a)
        s = Stream(self.port, "?job=%d" % a)
        try:
            self.assertEqual(s.status, 200, s.head)
            self.assertIsNotNone(s.read_until(lambda t: "retry: 2000" in t, 5), s.text)
            c.stop_redis()
            n = len(s.text)
            self.assertIsNotNone(s.read_until(lambda t: ": heartbeat" in t[n:],
                                              HEARTBEAT_S + 3), "no heartbeat without Redis")
            c.restart_redis()
            open(os.path.join(c.specdir, "gatea1"), "w").close()
            c.wait_value(lambda: c.trial(a, 1), lambda h: h.get("state") == "succeeded", 60,
                         "trial 1 to succeed after Redis came back")
            self.assertIsNotNone(s.read_until(lambda t: "trial.succeeded" in t, 5 * SPEED),
                                 "no event after Redis came back: %r" % s.text)
        finally:
            s.close()
        open(os.path.join(c.specdir, "gatea0"), "w").close()
        c.wait_job(a, timeout=60)


if __name__ == "__main__":
    main()
