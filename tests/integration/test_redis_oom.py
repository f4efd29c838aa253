#!/usr/bin/env python3
"""Redis at its maxmemory (noeviction): the coordinator's batches are
refused with OOM, and so is every `cgq submit` meanwhile — each refusal must
name the OOM, not a stale "unreachable (connected)" left by a lease
renewal's reconnect (issue 31's first defect: 1-2 of 6 said so). Once
maxmemory is raised the next submit goes through."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main, read_text  # noqa: E402

SPEC = '''name: oom
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, samples: 2}
objective: {metric: score, mode: max}
trial:
  kind: noop
  resources: {cpu: 1}
'''


class RedisOomTest(CgqTestCase):
    def test_submit_refusals_name_the_oom(self):
        c = self.start_default(workers=(("w1", 1),))
        spec = c.write_file("oom.yaml", SPEC)
        c.redis.cmd("CONFIG", "SET", "maxmemory-policy", "noeviction")
        c.redis.cmd("CONFIG", "SET", "maxmemory", "1")  # below what it uses: writes refused
        try:
            c.wait_for(lambda: "OOM" in read_text(c.coordinator.err_path), 20,
                       "a batch refused with OOM")
            # Six submits over ~4 s: lease renewals (every 1.7 s) reconnect
            # in between, and reset the store's last error.
            for i in range(6):
                r = c.cgq("submit", spec, timeout=30)
                self.assertEqual(r.returncode, 1, "submit %d: %s%s" % (i, r.stdout, r.stderr))
                self.assertIn("OOM", r.stderr, "submit %d names the cause" % i)
                self.assertIn("maxmemory", r.stderr, "submit %d says what to do" % i)
                self.assertNotIn("(connected", r.stderr, "submit %d" % i)
                time.sleep(0.7)
        finally:
            c.redis.cmd("CONFIG", "SET", "maxmemory", "0")
        c.wait_for(lambda: "Redis is back" in read_text(c.coordinator.err_path), 20,
                   "the coordinator's next batch to go through")
        j = c.submit(spec)
        self.assertEqual(c.wait_job(j, 30).get("state"), "finished")


if __name__ == "__main__":
    main()
