#!/usr/bin/env python3
"""A worker that was silent long enough to be declared dead comes back (its
trial kept running meanwhile) while its lost trial still waits in the queue:
the coordinator adopts the task from the worker's Hello instead of stopping it,
so the trial is not failed by the coordinator's own Stop (retries: 0) and
runs exactly once, with attempt 1."""

import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main  # noqa: E402

SCRIPT = r'''
import json, os, sys, time
rec = {"trial": int(os.environ["CGQ_TRIAL_ID"]), "attempt": int(os.environ["CGQ_ATTEMPT"])}
with open(os.path.join(os.environ["CGQ_SPEC_DIR"], "runs.txt"), "a") as f:
    f.write(json.dumps(rec) + "\n")
time.sleep(8 if rec["attempt"] == 1 else 0.5)
os.write(3, b'{"score": 1}\n')
'''

SPEC = '''name: node-return-itest
space:
  i: {grid: [0, 1]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/r.py
  resources: {cpu: 1}
  retries: 0
  timeout: 2m
'''


class NodeReturnTest(CgqTestCase):
    def test_returning_node_keeps_its_task(self):
        c = self.cluster
        c.start_redis()
        # 200 ms heartbeats, dead after 3 silent ones
        c.start_coordinator(extra=("--dead-after", "3"))
        w1 = c.start_worker("w1", cpus=1)
        w2 = c.start_worker("w2", cpus=1)
        c.write_file("r.py", SCRIPT)
        j = c.submit(c.write_file("r.yaml", SPEC))
        running = c.wait_value(
            lambda: {t: h for t, h in c.trials(j).items() if h.get("state") == "running"},
            lambda ts: len(ts) == 2, 30, "both trials to run")
        x = [t for t, h in running.items() if h.get("node") == "w1"][0]
        y = [t for t, h in running.items() if h.get("node") == "w2"][0]

        # w1 freezes (its trial process goes on) until it is declared dead.
        os.kill(w1.pid, signal.SIGSTOP)
        try:
            c.wait_for(lambda: c.redis.hgetall("cgq:node:w1").get("state") == "dead", 10,
                       "w1 to be declared dead")
            c.wait_for(lambda: c.trial(j, x).get("state") == "pending", 10,
                       "trial %d to return to the queue" % x)
            # w2 leaves: its trial is queued as well, ahead of w1's.
            problem = w2.stop()
            self.assertIsNone(problem, problem)
            w2.expect_exit = None
            c.wait_for(lambda: c.trial(j, y).get("state") == "pending", 10,
                       "trial %d to return to the queue" % y)
        finally:
            os.kill(w1.pid, signal.SIGCONT)

        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "2", job)
        self.assertIn(job.get("failed"), ("0", "", None), job)
        tx = c.trial(j, x)
        self.assertEqual(tx.get("state"), "succeeded", tx)
        self.assertEqual(tx.get("attempt"), "1", "trial %d was adopted, not re-run: %s" % (x, tx))
        with open(os.path.join(c.specdir, "runs.txt")) as f:
            runs = [json.loads(line) for line in f if line.strip()]
        self.assertEqual([r["attempt"] for r in runs if r["trial"] == x], [1],
                         "trial %d ran once: %s" % (x, runs))
        ev = c.events(j)
        for t in (x, y):
            ends = [e["type"] for e in ev if e.get("trial") == str(t) and e.get("type") in
                    ("trial.succeeded", "trial.failed", "trial.cancelled")]
            self.assertEqual(ends, ["trial.succeeded"], "trial %d ends exactly once" % t)
        self.assertIn(x, [int(e["trial"]) for e in ev if e.get("type") == "trial.adopted"])


if __name__ == "__main__":
    main()
