#!/usr/bin/env python3
"""Seed 002 end to end on a device runner: orchestration/examples/backend-pareto
as committed. A real cgq-device-runner (started in the example's directory
with its runner.yaml) measures a stand-in nnpackage_run whose time and memory
depend on the backend assignment; grid.yaml profiles all 32 assignments,
random.yaml 12 distinct ones; `cgq pareto --format seed002` is checked
against a front computed here from the stand-in's cost table."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, Proc, binary, main  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "orchestration",
                       "examples", "backend-pareto")
sys.path.insert(0, EXAMPLE)
import nnpackage_run_sim as sim  # noqa: E402

CHOICES = ["cpu", "acl_cl"]


def cost(aid):
    """(time ms, memory KB) of assignment id aid: digit k (base 2, least
    significant first) picks the backend of operator k, as cgq's assignment
    space numbers them."""
    t, m, prev = 0.0, 0, None
    for k, op in enumerate(sim.OPS):
        b = CHOICES[(aid >> k) & 1]
        dt, dm = sim.COST[op][b]
        t += dt + (sim.SWITCH_MS if prev not in (None, b) else 0.0)
        m += dm
        prev = b
    return round(t, 3), m + 10000


def front(points):
    return {a for a, p in points.items()
            if not any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in points.values())}


class BackendParetoTest(CgqTestCase):
    def test_grid_and_random_on_a_runner(self):
        c = self.start_default(workers=())
        argv = [binary("cgq-device-runner"), "--config", "runner.yaml", "--coordinator",
                c.nodes_ep, "--id", "lab1", "--workdir", os.path.join(c.tmp, "lab1"),
                "--heartbeat", "200ms"]
        env = dict(os.environ, CGQ_SIM_DIR=os.path.abspath(EXAMPLE))
        runner = Proc("runner", argv, c.logdir, env=env, cwd=os.path.abspath(EXAMPLE))
        c.procs.append(runner)
        c.wait_for(lambda: c.redis.hgetall("cgq:node:lab1").get("state") == "alive", 30,
                   "the runner to join")
        want = {a: cost(a) for a in range(32)}
        results = {}
        for name, n in (("grid", 32), ("random", 12)):
            j = c.submit(os.path.join(EXAMPLE, name + ".yaml"))
            job = c.wait_job(j, 120)
            self.assertEqual((job.get("state"), job.get("succeeded")), ("finished", str(n)), job)
            r = c.cgq("pareto", j, "--format", "seed002", "--all")
            self.assertEqual(r.returncode, 0, r.stderr)
            dump = json.loads(r.stdout)
            self.assertEqual(dump["oplist"], sim.OPS)
            got = {s["id"]: (s["time"], s["memory"]) for s in dump["solutions"]}
            self.assertEqual(len(got), n, "each assignment measured once")
            for a, p in got.items():
                self.assertAlmostEqual(p[0], want[a][0], places=2)
                self.assertEqual(p[1], want[a][1])
            r = c.cgq("pareto", j, "--format", "seed002")
            self.assertEqual(r.returncode, 0, r.stderr)
            on_front = {s["id"] for s in json.loads(r.stdout)["solutions"]}
            self.assertEqual(on_front, front({a: want[a] for a in got}), name)
            results[name] = on_front
        self.assertTrue(results["random"], "random sampling found a front too")


if __name__ == "__main__":
    main()
