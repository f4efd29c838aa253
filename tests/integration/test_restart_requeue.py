#!/usr/bin/env python3
"""Trials that were running when the coordinator was killed, whose failed
first attempts reach the restarted coordinator in the workers' Hello (so they
are retried, not adopted), then lost when their workers leave: they wait in
the queue past the adoption deadline of the recovery. The deadline must not
touch them (it once reused the queue's links and cut the queue, so a trial
never ran again and the job never finished). A new worker then runs both."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SPEED, CgqTestCase, endpoint_port, main  # noqa: E402

# attempt 1 fails after a moment, attempt 2 runs until its worker leaves,
# attempt 3 succeeds.
SCRIPT = r'''
import os, sys, time
a = int(os.environ["CGQ_ATTEMPT"])
if a == 1:
    time.sleep(1.0)
    sys.exit(3)
time.sleep(60 if a == 2 else 0.3)
os.write(3, b'{"score": 1}\n')
'''

SPEC = '''name: restart-requeue-itest
space:
  i: {grid: [0, 1]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/s.py
  resources: {cpu: 1}
  retries: 2
  timeout: 2m
'''

HEARTBEAT_S = 0.2
DEAD_AFTER = 15
ADOPT_WINDOW_S = 2 * HEARTBEAT_S * DEAD_AFTER  # documented: 2 x heartbeat x dead-after


class RestartRequeueTest(CgqTestCase):
    def test_adoption_deadline_leaves_the_queue_alone(self):
        c = self.cluster
        c.start_redis()
        flags = ("--dead-after", str(DEAD_AFTER))
        c.start_coordinator(extra=flags)
        w1 = c.start_worker("w1", cpus=1)
        w2 = c.start_worker("w2", cpus=1)
        c.write_file("s.py", SCRIPT)
        j = c.submit(c.write_file("s.yaml", SPEC))
        c.wait_value(lambda: [h.get("state") for h in c.trials(j).values()],
                     lambda st: st == ["running", "running"], 30, "both trials to run")

        # Killed while both first attempts run; they fail while it is away.
        c.coordinator.kill9()
        time.sleep(2.0 * SPEED)
        c.start_coordinator(extra=flags + (
            "--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
            "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))
        recovered_at = time.monotonic()

        # The Hellos carry the failed results: both retried as attempt 2.
        c.wait_value(lambda: sorted((h.get("state"), h.get("attempt")) for h in c.trials(j).values()),
                     lambda st: st == [("running", "2"), ("running", "2")], 20,
                     "both trials to run attempt 2")
        for w in (w1, w2):
            problem = w.stop()
            self.assertIsNone(problem, problem)
            w.expect_exit = None
        c.wait_value(lambda: [h.get("state") for h in c.trials(j).values()],
                     lambda st: st == ["pending", "pending"], 10, "both trials to be queued")
        self.assertLess(time.monotonic() - recovered_at, ADOPT_WINDOW_S,
                        "too slow: the adoption deadline passed before the trials were queued")

        # Past the adoption deadline (checked once per heartbeat), a worker joins.
        time.sleep(max(0.0, recovered_at + ADOPT_WINDOW_S + 1.0 - time.monotonic()))
        c.start_worker("w3", cpus=2)
        job = c.wait_job(j, 30)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "2", job)
        for t, h in c.trials(j).items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
            self.assertEqual(h.get("attempt"), "3", "trial %d: %s" % (t, h))
            self.assertEqual(h.get("node"), "w3", "trial %d: %s" % (t, h))
        ev = c.events(j)
        for t in (0, 1):
            ends = [e["type"] for e in ev if e.get("trial") == str(t) and e.get("type") in
                    ("trial.succeeded", "trial.failed", "trial.cancelled")]
            self.assertEqual(ends, ["trial.succeeded"], "trial %d ends exactly once" % t)
        self.assertEqual(c.redis.cmd("SCARD", "cgq:job:{%d}:active" % j), 0)


if __name__ == "__main__":
    main()
