#!/usr/bin/env python3
"""A stalled coordinator blames no node. The coordinator is stopped with
SIGSTOP for several times the heartbeat timeout mid-job, twice, then continued:
its own stall is not held against the nodes, so no node is declared dead,
no trial is lost or re-run, and every trial ends exactly once."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import CgqTestCase, main  # noqa: E402




class StallTest(CgqTestCase):
    def test_sigstop_coordinator_blames_no_node(self):
        # heartbeat 200 ms x dead-after 5: a node silent for 1 s is dead. The
        # stop lasts 4 s, four times that.
        c = self.start_default(workers=(("w1", 2), ("w2", 2)))
        j = c.submit(c.write_counted_job("stall-fault", 8, 1.5))
        c.wait_value(lambda: sum(1 for h in c.trials(j).values() if h.get("state") == "running"),
                     lambda n: n == 4, 30, "4 trials to run")
        pid = c.coordinator.pid
        # Twice: a second stall right after the first, while the nodes are
        # still reconnecting from it.
        for pause in (4.0, 2.5):
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(pause)
            finally:
                os.kill(pid, signal.SIGCONT)
            time.sleep(0.3)

        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "8", job)
        ev = c.events()
        dead = [e for e in ev if e.get("type") in ("node.dead", "node.left")]
        self.assertEqual(dead, [], "no node declared dead or gone by the stall")
        lost = [e for e in ev if e.get("type") == "trial.lost"]
        self.assertEqual(lost, [], "no trial lost by the stall")
        for t, h in c.trials(j).items():
            self.assertEqual(h.get("attempt"), "1", "trial %d was not re-run: %s" % (t, h))
        runs = c.counted_runs()
        self.assertEqual(runs, [(t, 1) for t in range(8)], "each trial's script ran once")
        for w in ("w1", "w2"):
            self.assertEqual(c.redis.hgetall("cgq:node:" + w).get("state"), "alive", w)
        with open(c.coordinator.err_path) as f:
            self.assertIn("did not listen for", f.read(), "the stall is logged")


if __name__ == "__main__":
    main()
