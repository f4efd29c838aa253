#!/usr/bin/env python3
"""The coordinator killed with SIGKILL mid-job and restarted on the same
ports: the job resumes from Redis, the trials that were running are adopted
from the workers' Hello (not re-run: attempt stays 1 and each trial's script
runs exactly once), and every trial ends exactly once."""

import os
import sys
import time

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

    def test_reconnect_after_restart_is_quiet(self):
        # Issue 23: a restarted coordinator warned "the sender never said
        # Hello" for the reports and results of nodes that were reconnecting
        # as they should. Those are expected, not rejections.
        c = self.start_default(workers=(("w1", 2),))
        c.write_file("chatty.py", """import json, os, sys, time
for k in range(40):
    os.write(3, (json.dumps({"k": k, "v": k}) + "\\n").encode())
    time.sleep(0.05)
""")
        j = c.submit(c.write_file("chatty.yaml", """name: chatty
space: {i: {grid: [0, 1, 2, 3]}}
objective: {metric: v, mode: max}
trial: {command: "python3 {spec_dir}/chatty.py", resources: {cpu: 1}}
"""))
        c.wait_value(lambda: sum(h.get("state") == "running" for h in c.trials(j).values()),
                     lambda n: n == 2, 30, "2 trials to run")
        time.sleep(0.3)
        c.coordinator.kill9()
        time.sleep(0.6)  # the nodes keep reporting into the void meanwhile
        with open(c.coordinator.err_path, "rb") as f:
            before = len(f.read())
        nodes_port, control_port = endpoint_port(c.nodes_ep), endpoint_port(c.control_ep)
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % nodes_port,
                                   "--control", "tcp://127.0.0.1:%d" % control_port))
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("succeeded"), "4", job)
        with open(c.coordinator.err_path, "rb") as f:
            log = f.read()[before:].decode("utf-8", "replace")
        self.assertNotIn("never said Hello", log)
        self.assertIn(c.redis.hgetall("cgq:coordinator").get("rejected", "0"), ("0", ""))


if __name__ == "__main__":
    main()
