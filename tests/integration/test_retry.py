#!/usr/bin/env python3
"""b. A trial that exits 1 with retries: 1 runs twice (attempt 2), then fails;
its error holds the exit status and the tail of what it printed on stderr."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main  # noqa: E402

SCRIPT = r'''
import os, sys
sys.stdout.write("some stdout noise\n")
sys.stderr.write("boom-marker: attempt %s of trial %s cannot continue\n"
                 % (os.environ["CGQ_ATTEMPT"], os.environ["CGQ_TRIAL_ID"]))
open(os.path.join(os.environ["CGQ_TRIAL_DIR"], "ran"), "w").close()
sys.exit(1)
'''

SPEC = '''name: retry-itest
space:
  x: 1
objective: {metric: score, mode: max}
trial:
  command: [python3, "{spec_dir}/fail.py"]
  retries: 1
  timeout: 1m
'''


class RetryTest(CgqTestCase):
    def test_exit_1_retried_once_then_failed(self):
        c = self.start_default()
        c.write_file("fail.py", SCRIPT)
        j = c.submit(c.write_file("retry.yaml", SPEC))
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("failed"), "1", job)
        self.assertIn(job.get("succeeded", "0"), ("0", ""), job)

        t = c.trial(j, 0)
        self.assertEqual(t.get("state"), "failed", t)
        self.assertEqual(t.get("attempt"), "2", t)
        err = t.get("error", "")
        self.assertIn("exit status 1", err, "error: %r" % err)
        self.assertIn("boom-marker: attempt 2", err, "error holds the stderr tail: %r" % err)
        self.assertIn("boom-marker", t.get("log", ""), "log tail: %r" % t.get("log"))

        # both attempts really ran, each in its own directory
        for a in (1, 2):
            d = os.path.join(c.workers["w1"].workdir, "job-%d" % j, "trial-0", "attempt-%d" % a)
            self.assertTrue(os.path.exists(os.path.join(d, "ran")), "attempt %d ran in %s" % (a, d))
            with open(os.path.join(d, "stderr.log")) as f:
                self.assertIn("boom-marker: attempt %d" % a, f.read())

        ev = c.events(j)
        types = [e.get("type") for e in ev if e.get("trial") == "0"]
        self.assertEqual(types.count("trial.retry"), 1, types)
        self.assertEqual(types.count("trial.failed"), 1, types)
        self.assertLess(types.index("trial.retry"), types.index("trial.failed"), types)
        # the leaderboard has no entry for a failed trial
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), 0)


if __name__ == "__main__":
    main()
