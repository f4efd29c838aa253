#!/usr/bin/env python3
"""The coordinator killed with SIGKILL mid-job and restarted on the same
ports: the job resumes from Redis, the trials that were running are adopted
from the workers' Hello (not re-run: attempt stays 1 and each trial's script
runs exactly once), and every trial ends exactly once."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, endpoint_port, main  # noqa: E402




class CoordinatorRestartTest(CgqTestCase):
    def test_kill9_coordinator_adopts_running_trials(self):
        c = self.start_default(workers=(("w1", 2), ("w2", 2)))
        j = c.submit(c.write_counted_job("restart-itest", 8, 2.0))
        running = c.wait_value(
            lambda: sorted(t for t, h in c.trials(j).items() if h.get("state") == "running"),
            lambda ts: len(ts) == 4, 30, "4 trials to run")

        old_epoch = c.epoch
        # A node the old coordinator saw alive that will never come back.
        c.redis.cmd("SADD", "cgq:nodes", "ghost")
        c.redis.cmd("HSET", "cgq:node:ghost", "id", "ghost", "state", "alive", "running", "3")
        c.coordinator.kill9()
        nodes_port = endpoint_port(c.nodes_ep)
        control_port = endpoint_port(c.control_ep)
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % nodes_port,
                                   "--control", "tcp://127.0.0.1:%d" % control_port))
        self.assertGreater(c.epoch, old_epoch, "a restart starts a new epoch")
        ghost = c.redis.hgetall("cgq:node:ghost")
        self.assertEqual(ghost.get("state"), "unknown", "not alive until it says Hello: %s" % ghost)

        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "8", job)

        trials = c.trials(j)
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
            self.assertEqual(h.get("attempt"), "1", "trial %d was not re-run: %s" % (t, h))
        runs = c.counted_runs()
        self.assertEqual(runs, [(t, 1) for t in range(8)], "each trial's script ran once")

        ev = c.events(j)
        adopted = sorted(int(e["trial"]) for e in ev if e.get("type") == "trial.adopted")
        self.assertEqual(adopted, running, "the running trials were adopted")
        for t in range(8):
            ends = [e["type"] for e in ev if e.get("trial") == str(t) and e.get("type") in
                    ("trial.succeeded", "trial.failed", "trial.cancelled")]
            self.assertEqual(ends, ["trial.succeeded"], "trial %d ends exactly once" % t)
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), 8)
        self.assertEqual(c.redis.cmd("SCARD", "cgq:job:{%d}:active" % j), 0)
        for w in ("w1", "w2"):  # the real nodes are alive again after their Hello
            self.assertEqual(c.redis.hgetall("cgq:node:" + w).get("state"), "alive", w)


if __name__ == "__main__":
    main()
