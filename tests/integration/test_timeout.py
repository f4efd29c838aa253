#!/usr/bin/env python3
"""c. A trial past its timeout is killed with its whole process group (a
background child that ignores SIGTERM too) and fails with "timed out"."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main, pid_alive  # noqa: E402

# The trial starts a child that ignores SIGTERM (only SIGKILL after the grace
# period ends it), records both PIDs, reports once and sleeps far past the timeout.
SCRIPT = r'''
import json, os, signal, subprocess, sys, time
child = subprocess.Popen(["/bin/sh", "-c", "trap '' TERM; sleep 60 & wait; sleep 60"])
with open(os.path.join(os.environ["CGQ_SPEC_DIR"], "pids-%s.txt" % os.environ["CGQ_TRIAL_ID"]), "w") as f:
    f.write("%d %d\n" % (os.getpid(), child.pid))
os.write(3, b'{"score": 1}\n')
time.sleep(60)
'''

SPEC = '''name: timeout-itest
space:
  x: 1
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/slow.py
  timeout: 1s
  retries: 0
'''


class TimeoutTest(CgqTestCase):
    def test_timeout_kills_process_group(self):
        c = self.start_default()
        c.write_file("slow.py", SCRIPT)
        t0 = time.monotonic()
        j = c.submit(c.write_file("timeout.yaml", SPEC))
        pidfile = os.path.join(c.specdir, "pids-0.txt")
        c.wait_for(lambda: os.path.exists(pidfile) and os.path.getsize(pidfile) > 0, 30,
                   "the trial to write its PIDs")
        with open(pidfile) as f:
            pids = [int(x) for x in f.read().split()]
        job = c.wait_job(j, 30)
        elapsed = time.monotonic() - t0
        self.assertEqual(job.get("state"), "finished", job)
        t = c.trial(j, 0)
        self.assertEqual(t.get("state"), "failed", t)
        self.assertRegex(t.get("error", ""), r"^timed out after 1(\.0+)?s", t)
        self.assertEqual(t.get("attempt"), "1", t)
        # 1 s timeout + 1 s kill grace + slack, far below the trial's 60 s sleep
        self.assertLess(elapsed, 20, "trial ended %.1fs after submit" % elapsed)
        c.wait_for(lambda: not any(pid_alive(p) for p in pids), 10,
                   "trial PIDs %s to be gone" % pids)
        for p in pids:
            self.assertFalse(pid_alive(p), "pid %d still alive" % p)


if __name__ == "__main__":
    main()
