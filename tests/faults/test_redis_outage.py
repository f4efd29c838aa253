#!/usr/bin/env python3
"""A Redis outage longer than a few trials: running trials keep running and
finish; the coordinator holds their state changes in memory up to
--max-buffer commands, past that leaves the results with their nodes (which
keep them until acked), dispatches nothing, and when Redis is back persists
everything once. Every trial ends exactly once; nothing runs twice."""

import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import CgqTestCase, main  # noqa: E402


N = 24

OUTAGE_S = 10.0
MAX_BUFFER = 30


class RedisOutageTest(CgqTestCase):
    def test_outage_buffers_boundedly_and_loses_nothing(self):
        c = self.cluster
        c.start_redis(appendonly=True)
        c.start_coordinator(extra=("--max-buffer", str(MAX_BUFFER), "--durable-after", "0"))
        for w in ("w1", "w2"):
            c.start_worker(w, cpus=2)
        j = c.submit(c.write_counted_job("redis-outage", N, 0.4))
        c.wait_value(lambda: int(c.redis.hgetall("cgq:job:{%d}" % j).get("succeeded", "0")),
                     lambda n: n >= 4, 30, "a few trials to finish")
        c.stop_redis()
        time.sleep(OUTAGE_S)
        c.restart_redis()
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), str(N), job)
        for t, h in c.trials(j).items():
            self.assertEqual((h.get("state"), h.get("attempt")), ("succeeded", "1"),
                             "trial %d: %s" % (t, h))
        ok = [int(e["trial"]) for e in c.events(j) if e.get("type") == "trial.succeeded"]
        self.assertEqual(sorted(ok), list(range(N)))
        self.assertEqual([e for e in c.events(j) if e.get("type") == "trial.lost"], [])
        runs = c.counted_runs()
        self.assertEqual(runs, [(t, 1) for t in range(N)], "each trial's script ran once")
        with open(c.coordinator.err_path) as f:
            log = f.read()
        self.assertIn("results stay with their nodes", log, "the bound was reached")
        kept = [int(n) for n in re.findall(r"; (\d+) command\(s\) kept", log)]
        self.assertTrue(kept, "the coordinator held a batch while Redis was down")
        # Past the bound only node bookkeeping (heartbeats) is added: a
        # handful of commands per node, not one per result.
        self.assertLess(max(kept), MAX_BUFFER + 40, kept)
        print("during a %.0f s Redis outage the coordinator held at most %d state changes "
              "(--max-buffer %d); the rest waited on the nodes" % (OUTAGE_S, max(kept), MAX_BUFFER))


if __name__ == "__main__":
    main()
