#!/usr/bin/env python3
"""Hundreds of nodes in one cgq-simnodes process (bench/simnodes.c), heartbeating
every 200 ms: they all join and stay alive; heartbeats write nothing to Redis,
yet every node's last_seen moves on (the liveness check writes it every
SESSION_SEEN_WRITE_MS, 5 s) and stays inside the CLI's 10 s `dead?` mark; a
noop job runs across them (the heartbeat hold of coordinator/loop.h is on at
this rate, and results still flow); and when they say Bye they are gone."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import BIN_DIR, SPEED, CgqTestCase, Proc, main, noop_spec  # noqa: E402

N = 300

class ManyNodesTest(CgqTestCase):
    def nodes(self, fields):
        c = self.cluster
        reps = c.redis.pipeline([("HMGET", "cgq:node:sim-%05d" % i) + tuple(fields)
                                 for i in range(N)])
        return {"sim-%05d" % i: r for i, r in enumerate(reps)}

    def test_many_nodes(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()  # 200 ms heartbeats
        sim = Proc("simnodes", [os.path.join(BIN_DIR, "cgq-simnodes"), "--coordinator",
                                c.nodes_ep, "--nodes", str(N), "--duration", "120"],
                   c.logdir, capture_stdout=True)
        c.procs.append(sim)
        line = sim.wait_first_line(60 * SPEED)
        self.assertTrue(line and line.startswith("simnodes: welcomed %d nodes" % N), line)

        first = self.nodes(("state", "last_seen"))
        self.assertEqual(sorted(set(s for s, _ in first.values())), ["alive"], first)
        self.assertEqual(int(c.redis.cmd("SCARD", "cgq:nodes")), N)

        # Every node's last_seen moves on within SESSION_SEEN_WRITE_MS and a
        # liveness pass or two, though no heartbeat writes it.
        def all_moved():
            now = self.nodes(("state", "last_seen"))
            return all(st == "alive" and float(seen) > float(first[k][1])
                       for k, (st, seen) in now.items())
        c.wait_for(all_moved, 15, "every node's last_seen to move on", interval=0.5)
        now = time.time()
        for k, (st, seen) in self.nodes(("state", "last_seen")).items():
            self.assertEqual(st, "alive", k)
            self.assertLess(now - float(seen), 10, "%s: last_seen %s, now %.3f" % (k, seen, now))

        j = c.submit(c.write_file("many.yaml", noop_spec("many-nodes-itest", 2 * N)))
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), str(2 * N), job)

        # Bye from every node (cgq-simnodes stops on SIGTERM): all gone.
        problem = sim.stop()
        self.assertIsNone(problem, problem)
        c.procs.remove(sim)  # stopped on purpose: not a daemon that died
        c.wait_for(lambda: all(st == "gone" for st, in self.nodes(("state",)).values()), 20,
                   "every node to be gone after its Bye")
        with open(sim.out_path) as f:
            summary = f.read().strip().splitlines()[-1]
        self.assertIn("welcomed=%d " % N, summary)
        self.assertIn("unknown=0 ", summary)
        self.assertIn("results=%d " % (2 * N), summary)


if __name__ == "__main__":
    main()
