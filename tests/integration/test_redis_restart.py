#!/usr/bin/env python3
"""Redis stopped mid-job and started again (AOF on): the coordinator keeps
its batch and retries with back-off, assigns nothing it cannot record, and
the workers keep their results until they are acknowledged. The job then
finishes with every trial run once and recorded once, and the job's state
counters agree with the trials."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main  # noqa: E402

SCRIPT = r'''
import json, os, sys, time
with open(sys.argv[1], "a") as f:
    f.write("%s %s\n" % (os.environ["CGQ_TRIAL_ID"], os.environ["CGQ_ATTEMPT"]))
time.sleep(float(sys.argv[2]))
os.write(3, (json.dumps({"v": int(os.environ["CGQ_TRIAL_ID"])}) + "\n").encode())
'''

SPEC = '''name: redis-restart-itest
space:
  i: {grid: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/t.py {spec_dir}/runs.txt 0.6
  resources: {cpu: 1}
'''


class RedisRestartTest(CgqTestCase):
    def test_redis_restart_mid_job(self):
        c = self.cluster
        c.start_redis(appendonly=True)
        c.start_coordinator()
        c.start_worker("w1", cpus=2)
        c.start_worker("w2", cpus=2)
        c.write_file("t.py", SCRIPT)
        j = c.submit(c.write_file("r.yaml", SPEC))
        c.wait_value(lambda: int(c.job(j).get("succeeded") or 0), lambda n: n >= 2, 30,
                     "2 trials to succeed")

        c.stop_redis()
        time.sleep(1.5)  # trials finish meanwhile; their results cannot be recorded yet
        self.assertTrue(c.coordinator.alive(), "the coordinator survives Redis going away")
        # A submit meanwhile is refused at once, not held: a submitter that
        # gave up and tried again would make the job twice.
        r = c.cgq("submit", c.write_file("later.yaml", SPEC.replace("redis-restart-itest",
                                                                    "later")), timeout=20)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("the job was not submitted", r.stderr)
        c.restart_redis()

        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        for state, want in (("succeeded", "12"), ("running", "0"), ("pending", "0"),
                            ("failed", "0")):
            self.assertEqual(job.get(state), want, "%s count: %s" % (state, job))

        trials = c.trials(j)
        self.assertEqual(sorted(trials), list(range(12)))
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
            self.assertEqual(h.get("attempt"), "1", "trial %d ran once: %s" % (t, h))
        with open(os.path.join(c.specdir, "runs.txt")) as f:
            runs = sorted(tuple(map(int, line.split())) for line in f if line.strip())
        self.assertEqual(runs, [(t, 1) for t in range(12)], "each trial's script ran once")
        ev = c.events(j)
        for t in range(12):
            ends = [e["type"] for e in ev if e.get("trial") == str(t) and e.get("type") in
                    ("trial.succeeded", "trial.failed", "trial.cancelled")]
            self.assertEqual(ends, ["trial.succeeded"], "trial %d ends exactly once" % t)
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), 12)
        self.assertEqual(job.get("best_trial"), "11", job)
        self.assertEqual([int(x) for x in c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1)], [j],
                         "the refused submit left nothing")
        # Redis back: the same submit is taken, under a new id.
        k = c.submit(os.path.join(c.specdir, "later.yaml"))
        self.assertGreater(k, j)
        self.assertEqual(c.job(k).get("name"), "later")
        self.assertEqual(c.wait_job(k, 60).get("succeeded"), "12")


if __name__ == "__main__":
    main()
