#!/usr/bin/env python3
"""f. `cgq cancel J` of a running job: the job and its trials are cancelled,
and the trial processes are gone."""

import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main, pid_alive  # noqa: E402

SCRIPT = r'''
import os, subprocess, time
child = subprocess.Popen(["sleep", "60"])
with open(os.path.join(os.environ["CGQ_SPEC_DIR"], "pids-%s.txt" % os.environ["CGQ_TRIAL_ID"]), "w") as f:
    f.write("%d %d\n" % (os.getpid(), child.pid))
time.sleep(60)
'''

SPEC = '''name: cancel-itest
space:
  i: {grid: [0, 1, 2, 3, 4, 5]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/forever.py
  resources: {cpu: 1}
'''


class CancelTest(CgqTestCase):
    def test_cancel_running_job(self):
        c = self.start_default(workers=(("w1", 3),))
        c.write_file("forever.py", SCRIPT)
        j = c.submit(c.write_file("cancel.yaml", SPEC))
        c.wait_for(lambda: len(glob.glob(os.path.join(c.specdir, "pids-*.txt"))) == 3, 30,
                   "3 trials to start and write their PIDs")
        pids = []
        for path in glob.glob(os.path.join(c.specdir, "pids-*.txt")):
            c.wait_for(lambda: os.path.getsize(path) > 0, 5, "pid file %s" % path)
            with open(path) as f:
                pids.extend(int(x) for x in f.read().split())
        self.assertTrue(all(pid_alive(p) for p in pids), "trial processes run before cancel")

        r = c.cgq("cancel", j)
        self.assertEqual(r.returncode, 0, "cgq cancel: %s %s" % (r.stdout, r.stderr))
        job = c.wait_job(j, 30, states=("cancelled",))
        self.assertEqual(job.get("state"), "cancelled", job)
        self.assertTrue(job.get("finished"), "job has a finished time: %s" % job)

        trials = c.trials(j)
        self.assertGreaterEqual(len(trials), 3, trials)
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "cancelled", "trial %d: %s" % (t, h))
        # Trials never created count as cancelled too: the counts add up to the total.
        self.assertEqual(job.get("cancelled"), job.get("total"), job)
        self.assertEqual(sum(int(job.get(k, 0)) for k in ("pending", "running", "succeeded",
                         "failed", "stopped", "cancelled", "unschedulable")), 6, job)
        for k in ("running", "pending"):
            self.assertIn(job.get(k, "0"), ("0", ""), "job %s: %s" % (k, job))
        self.assertEqual(c.redis.cmd("SCARD", "cgq:job:{%d}:active" % j), 0, "active set empty")

        c.wait_for(lambda: not any(pid_alive(p) for p in pids), 10 + 2,
                   "trial processes %s to be gone" % pids)
        ev = [e["type"] for e in c.events(j)]
        self.assertEqual(ev.count("job.cancelled"), 1, ev)

        # the worker's slots are free again: a new job runs to the end
        c.write_file("ok.sh", "echo '{\"score\": 1}' >&3\n")
        j2 = c.submit(c.write_file("ok.yaml", "name: after-cancel\nspace: {x: 1}\n"
                                   "objective: {metric: score, mode: max}\n"
                                   "trial: {command: \"sh {spec_dir}/ok.sh\"}\n"))
        job2 = c.wait_job(j2, 30)
        self.assertEqual(job2.get("succeeded"), "1", job2)


if __name__ == "__main__":
    main()
