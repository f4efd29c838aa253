#!/usr/bin/env python3
"""What a restarted coordinator must remember of a job's and a trial's
errors, or nothing clears them: a job blocked (gpu: 1, only a CPU worker)
when the coordinator restarts loses its `blocked` reason once a GPU worker
joins and its trials run, and the trial shown as unschedulable ends without
the stale "needs gpu" error; a trial whose attempt was lost before the
restart and that succeeds after it ends without the "attempt 1 lost" error."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, endpoint_port, main  # noqa: E402

SCRIPT = r'''
import os, time
time.sleep(1.5)
os.write(3, b'{"score": 1}\n')
'''

SPEC = '''name: restart-blocked-itest
space:
  i: {grid: [0, 1]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/b.py
  resources: {gpu: 1, cpu: 1}
  timeout: 2m
'''


class RestartBlockedTest(CgqTestCase):
    def test_blocked_job_unblocks_after_restart(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        w1 = c.start_worker("w1", cpus=2)
        c.write_file("b.py", SCRIPT)
        j = c.submit(c.write_file("b.yaml", SPEC))
        c.wait_for(lambda: c.job(j).get("blocked"), 20, "job %d to be blocked" % j)
        t0 = c.wait_value(lambda: c.trial(j, 0), lambda h: h.get("state") == "unschedulable",
                          10, "trial 0 to be unschedulable")
        self.assertIn("gpu", t0.get("error", ""), t0)

        # The CPU worker leaves, the coordinator restarts, a GPU worker joins.
        problem = w1.stop()
        self.assertIsNone(problem, problem)
        w1.expect_exit = None
        c.coordinator.kill9()
        c.start_coordinator(extra=(
            "--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
            "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))
        c.start_worker("g1", cpus=2, gpus="fake:1")

        c.wait_for(lambda: any(h.get("state") == "running" for h in c.trials(j).values()), 20,
                   "a trial to run on g1")
        # one Redis batch sets the trial running and clears blocked
        self.assertIn(c.job(j).get("blocked"), (None, ""), "job still blocked while it runs: %s"
                      % c.job(j))
        job = c.wait_job(j, 30)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "2", job)
        for t, h in c.trials(j).items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
            self.assertIn(h.get("error"), (None, ""), "trial %d kept a stale error: %s" % (t, h))

    def test_lost_attempt_error_cleared_after_restart(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        w1 = c.start_worker("w1", cpus=1)
        c.write_file("b.py", SCRIPT)
        j = c.submit(c.write_file("one.yaml", SPEC.replace("[0, 1]", "[0]").replace(
            "gpu: 1, ", "")))
        c.wait_for(lambda: c.trial(j, 0).get("state") == "running", 20, "trial 0 to run")
        problem = w1.stop()  # Bye: the attempt is lost, the trial queued again
        self.assertIsNone(problem, problem)
        w1.expect_exit = None
        t0 = c.wait_value(lambda: c.trial(j, 0), lambda h: h.get("state") == "pending", 10,
                          "trial 0 to be queued again")
        self.assertIn("lost", t0.get("error", ""), t0)

        c.coordinator.kill9()
        c.start_coordinator(extra=(
            "--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
            "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))
        c.start_worker("w2", cpus=1)
        job = c.wait_job(j, 30)
        self.assertEqual(job.get("succeeded"), "1", job)
        t0 = c.trial(j, 0)
        self.assertEqual((t0.get("state"), t0.get("attempt")), ("succeeded", "2"), t0)
        self.assertIn(t0.get("error"), (None, ""), "trial 0 kept a stale error: %s" % t0)


if __name__ == "__main__":
    main()
