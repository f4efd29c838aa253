#!/usr/bin/env python3
"""e. A worker killed with SIGKILL mid-trial: after the heartbeat timeout its
trials re-run on the other worker (attempt 2), each trial ends exactly once,
and the job finishes with every trial succeeded."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main  # noqa: E402

SCRIPT = r'''
import json, os, sys, time
time.sleep(float(sys.argv[1]))
os.write(3, (json.dumps({"score": int(os.environ["CGQ_TRIAL_ID"]),
                         "attempt": int(os.environ["CGQ_ATTEMPT"])}) + "\n").encode())
'''

SPEC = '''name: kill-itest
space:
  i: {grid: [0, 1, 2, 3, 4, 5]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/long.py 2.5
  resources: {cpu: 1}
  retries: 0
  timeout: 1m
'''


class WorkerKillTest(CgqTestCase):
    def test_sigkill_worker_trials_rerun_elsewhere(self):
        c = self.start_default(workers=(("w1", 2), ("w2", 2)))
        c.write_file("long.py", SCRIPT)
        j = c.submit(c.write_file("kill.yaml", SPEC))

        # both workers full (2 + 2 slots), so nothing new starts before the kill
        running = c.wait_value(
            lambda: {t: h for t, h in c.trials(j).items() if h.get("state") == "running"},
            lambda ts: len(ts) == 4, 30, "4 trials to run")
        self.assertIn(0, running, "trials 0-3 start first: %s" % sorted(running))
        victim = running[0]["node"]
        survivor = ({"w1", "w2"} - {victim}).pop()
        on_victim = sorted(t for t, h in running.items() if h.get("node") == victim)
        self.assertEqual(len(on_victim), 2, "2 trials per worker: %s" % running)
        self.assertIn(0, on_victim)
        c.workers[victim].kill9()

        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "6", job)
        self.assertIn(job.get("failed", "0"), ("0", ""), job)

        trials = c.trials(j)
        self.assertEqual(sorted(trials), list(range(6)))
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
        t0 = trials[0]
        self.assertEqual(t0.get("attempt"), "2", "trial 0 re-ran: %s" % t0)
        self.assertEqual(t0.get("node"), survivor, "trial 0 re-ran on %s: %s" % (survivor, t0))
        for t in on_victim:
            self.assertEqual(trials[t].get("node"), survivor, "trial %d: %s" % (t, trials[t]))
            self.assertEqual(trials[t].get("attempt"), "2", "trial %d: %s" % (t, trials[t]))

        ev = c.events(j)
        for t in range(6):
            ends = [e["type"] for e in ev if e.get("trial") == str(t) and e.get("type") in
                    ("trial.succeeded", "trial.failed", "trial.cancelled")]
            self.assertEqual(ends, ["trial.succeeded"], "trial %d ends exactly once" % t)
        lost = sorted(int(e["trial"]) for e in ev if e.get("type") == "trial.lost")
        self.assertEqual(lost, on_victim, "trial.lost events")
        node_ev = [e for e in c.events() if e.get("node") == victim and e.get("type") == "node.dead"]
        self.assertEqual(len(node_ev), 1, "one node.dead event for %s" % victim)
        node = c.redis.hgetall("cgq:node:" + victim)
        self.assertEqual(node.get("state"), "dead", node)
        # the leaderboard counts each trial once
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), 6)


if __name__ == "__main__":
    main()
