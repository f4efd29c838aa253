#!/usr/bin/env python3
"""i. Errors: a bad spec, an unreachable Redis, no coordinator, and garbage on
the coordinator's sockets (it keeps serving)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (CgqTestCase, endpoint_port, free_port, main, raw_tcp_send,  # noqa: E402
                     zmtp_send)

BAD_SPEC = '''name: bad
space:
  x: {uniform: [0, 1]}
search:
  algorithm: random
  samplez: 3
trial: {kind: noop}
'''

BAD_DIST = '''name: bad2
space:
  lr: {loguniformm: [0.001, 0.1]}
trial: {kind: noop}
'''

GOOD_SPEC = '''name: noop-itest
space:
  x: {uniform: [0, 1]}
  y: {grid: [1, 2]}
search: {algorithm: random, samples: 5, seed: 3}
objective: {metric: score, mode: max}
trial: {kind: noop}
'''


class ErrorsTest(CgqTestCase):
    def test_errors(self):
        c = self.start_default()
        good = c.write_file("good.yaml", GOOD_SPEC)

        # -- a bad spec: exit 2, FILE:LINE:COL of the offending key
        bad = c.write_file("bad.yaml", BAD_SPEC)
        r = c.cgq("submit", bad)
        self.assertEqual(r.returncode, 2, "bad spec exit status (stdout %r, stderr %r)"
                         % (r.stdout, r.stderr))
        msg = r.stderr + r.stdout
        self.assertRegex(msg, r"bad\.yaml:6:3\b", "error names bad.yaml:6:3 (the unknown key "
                         "'samplez')")
        self.assertIn("samplez", msg)
        bad2 = c.write_file("bad2.yaml", BAD_DIST)
        r = c.cgq("submit", bad2)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr + r.stdout, r"bad2\.yaml:3:\d+", "error names bad2.yaml:3")
        r = c.cgq("submit", os.path.join(c.specdir, "missing.yaml"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("missing.yaml", r.stderr + r.stdout)
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:jobs"), 0, "no job was created")

        # -- too many trials: submit and validate refuse it with the same reason
        big = c.write_file("big.yaml", "name: big\nspace:\n  x: {uniform: [0, 1]}\n"
                           "search: {algorithm: random, samples: 1000000000000}\n"
                           "trial: {command: \"true\"}\n")
        why = ("the search has 1000000000000 trials, more than the limit of 10000000 (lower "
               "search.samples or the grid, or raise cgq-coordinator --max-trials)")
        r = c.cgq("submit", big)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("big.yaml: " + why, r.stderr)
        r = c.cgq("validate", big)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("big.yaml: " + why, r.stderr)
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:jobs"), 0, "no job was created")

        # -- unreachable Redis: exit 1, quickly, naming the URL
        dead = free_port()
        url = "redis://127.0.0.1:%d/0" % dead
        r = c.cgq("status", "1", env=c.cli_env(CGQ_REDIS=url), timeout=20)
        self.assertEqual(r.returncode, 1, "status with no Redis (stderr %r)" % r.stderr)
        self.assertLess(r.elapsed, 5.0, "status with no Redis took %.1fs" % r.elapsed)
        self.assertIn("127.0.0.1:%d" % dead, r.stderr + r.stdout, "message names the URL")

        # -- no coordinator: exit 1, quickly
        ep = "tcp://127.0.0.1:%d" % free_port()
        r = c.cgq("submit", good, env=c.cli_env(CGQ_COORDINATOR=ep), timeout=20)
        self.assertEqual(r.returncode, 1, "submit with no coordinator (stderr %r)" % r.stderr)
        self.assertLess(r.elapsed, 5.0, "submit with no coordinator took %.1fs" % r.elapsed)
        self.assertIn(ep.split("//")[1], r.stderr + r.stdout, "message names the endpoint")

        # -- garbage on the coordinator's sockets
        nodes_port = endpoint_port(c.nodes_ep)
        control_port = endpoint_port(c.control_ep)
        raw_tcp_send("127.0.0.1", nodes_port, os.urandom(512))
        raw_tcp_send("127.0.0.1", control_port, b"GET / HTTP/1.0\r\n\r\n" + os.urandom(100))
        before = int(c.redis.hgetall("cgq:coordinator").get("dropped_frames") or 0)
        # frames that reach the application: undecodable bytes, an Envelope of
        # another version (version=99, an empty Heartbeat), an oversized frame
        zmtp_send("127.0.0.1", nodes_port, [b"\x0a\xff\xff\xff\xff\x0fgarbage"], identity=b"evil1")
        zmtp_send("127.0.0.1", nodes_port, [b"\x08\x63\x62\x00"], identity=b"evil2")
        zmtp_send("127.0.0.1", nodes_port, [b"x" * 5000, b"y"], identity=b"evil3")
        zmtp_send("127.0.0.1", control_port, [b"", b"\xff\xfe garbage"], socket_type=b"REQ")
        zmtp_send("127.0.0.1", control_port, [b"no delimiter"], socket_type=b"DEALER")

        def counted():
            n = int(c.redis.hgetall("cgq:coordinator").get("dropped_frames") or 0)
            return n if n >= before + 2 else None
        try:
            c.wait_for(counted, 10, "cgq:coordinator dropped_frames to count the bad frames")
        except AssertionError as e:
            self.fail("%s (now %s)" % (e, c.redis.hgetall("cgq:coordinator")))
        self.assertTrue(c.coordinator.alive())

        # it keeps serving
        j = c.submit(good)
        job = c.wait_job(j, 30)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "10", job)
        self.assertNotIn("evil", " ".join(c.redis.cmd("SMEMBERS", "cgq:nodes")),
                         "garbage senders are not nodes")


if __name__ == "__main__":
    main()
