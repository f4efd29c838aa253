#!/usr/bin/env python3
"""A coordinator that cannot serve never holds the leader lease (issue 31's
third defect): one started with a non-loopback --bind and no CURVE keys
beside a leader refuses at once (exit 1) instead of standing by, taking over
later, refusing then and leaving the lease held with the epoch bumped; and
one that takes the lease and then cannot bind its port releases it on the
way out, so a standby need not wait out the lease."""

import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, binary, free_port, main  # noqa: E402


class LeaseRefuseTest(CgqTestCase):
    def _coordinator(self, *args):
        argv = [binary("cgq-coordinator"), "--redis", self.cluster.redis_url,
                "--control", "tcp://127.0.0.1:%d" % free_port()] + list(args)
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=20)

    def test_open_bind_refused_before_standing_by(self):
        c = self.start_default(workers=())
        leader = c.redis.cmd("GET", "cgq:leader")
        epoch = c.redis.cmd("GET", "cgq:seq:epoch")
        t0 = time.monotonic()
        r = self._coordinator("--bind", "tcp://0.0.0.0:%d" % free_port())
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("refusing to bind", r.stderr)
        self.assertNotIn("standby", r.stdout, "it refused before standing by")
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(c.redis.cmd("GET", "cgq:leader"), leader, "the lease is untouched")
        self.assertEqual(c.redis.cmd("GET", "cgq:seq:epoch"), epoch, "no epoch taken")

    def test_bind_failure_releases_the_lease(self):
        c = self.cluster
        c.start_redis()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            port = s.getsockname()[1]
            r = self._coordinator("--bind", "tcp://127.0.0.1:%d" % port)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertEqual(c.redis.cmd("GET", "cgq:seq:epoch"), "1", "it took the lease")
        self.assertIsNone(c.redis.cmd("GET", "cgq:leader"),
                          "the lease was released on the way out:\n" + r.stderr)


if __name__ == "__main__":
    main()
