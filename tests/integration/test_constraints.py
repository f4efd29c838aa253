#!/usr/bin/env python3
"""Constraints (issue 25) end to end: noop trials report their params as
metrics, and constraints cut the grid. The best is the best feasible trial
(job hash, leaderboard, `cgq status`, `cgq results`), every infeasible
trial records feasible 0 and its violation, `cgq results` shows a feasible
column (table, csv, json), and `cgq pareto` of a two-objective job lists
only feasible trials and says how many infeasible ones it left out."""

import csv
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, fnum, main, params_of  # noqa: E402

ONE = '''name: cons-one
space:
  x: {grid: [1, 2, 3, 4, 5, 6]}
  y: {grid: [1, 2]}
search: {algorithm: grid}
objective: {metric: x, mode: max}
constraints: ["x <= 4", "x * y <= 7"]
trial: {kind: noop}
'''

TWO = '''name: cons-two
space:
  x: {grid: [1, 2, 3, 4, 5, 6]}
  y: {grid: [1, 2]}
search: {algorithm: grid}
objectives: [{metric: x, mode: max}, {metric: y, mode: max}]
constraints: ["x + y <= 6"]
trial: {kind: noop}
'''


def violation(x, y):
    v = {}
    if x > 4:
        v["x <= 4"] = x - 4
    if x * y > 7:
        v["x * y <= 7"] = x * y - 7
    return v


class ConstraintsTest(CgqTestCase):
    def test_constraints_cut_the_space(self):
        c = self.start_default(workers=(("w1", 4),))
        path = c.write_file("one.yaml", ONE)
        r = c.cgq("validate", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("constraints", r.stdout)
        self.assertIn("  x <= 4\n", r.stdout)
        self.assertIn("  x * y <= 7\n", r.stdout)

        j = c.submit(path)
        job = c.wait_job(j, 60)
        self.assertEqual((job.get("state"), job.get("succeeded")), ("finished", "12"), job)
        trials = c.trials(j)
        by_xy = {}
        for t, h in trials.items():
            p = params_of(h)
            x, y = p["x"], p["y"]
            by_xy[(x, y)] = t
            want = violation(x, y)
            self.assertEqual(h.get("feasible"), "0" if want else "1", (x, y, h))
            if want:
                self.assertEqual(json.loads(h["violation"]), want, (x, y, h))
            else:
                self.assertNotIn("violation", h, (x, y, h))
            self.assertEqual(fnum(h.get("value")), x, h)  # the value is kept either way
        best = by_xy[(4, 1)]
        self.assertEqual((job.get("best_trial"), fnum(job.get("best_value"))), (str(best), 4.0),
                         job)
        board = c.redis.cmd("ZRANGE", "cgq:job:{%d}:leaderboard" % j, 0, -1)
        feasible = sorted(t for t, h in trials.items() if h.get("feasible") == "1")
        self.assertEqual(sorted(int(t) for t in board), feasible)

        r = c.cgq("status", j)
        self.assertEqual(r.returncode, 0, r.stderr)
        top5 = r.stdout.split("top ")[1].splitlines()[2:]
        self.assertEqual(len(top5), 5, r.stdout)
        for ln in top5:  # rank, trial, value: feasible ones only
            self.assertEqual(trials[int(ln.split()[1])].get("feasible"), "1", r.stdout)
        best_line = [ln for ln in r.stdout.splitlines() if ln.startswith("best")]
        self.assertTrue(best_line and "trial %d" % best in best_line[0], r.stdout)

        r = c.cgq("results", j, "--top", "1", "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        top = json.loads(r.stdout)["trials"]
        self.assertEqual([t["id"] for t in top], [best])
        self.assertIs(top[0]["feasible"], True)

        r = c.cgq("results", j, "--format", "json")
        listed = json.loads(r.stdout)["trials"]
        # Ranked: the 7 feasible ones best first, then the infeasible by id.
        self.assertEqual([t["feasible"] for t in listed], [True] * 7 + [False] * 5)
        self.assertEqual([t["id"] for t in listed[7:]], sorted(t["id"] for t in listed[7:]))
        self.assertEqual([t["id"] for t in listed][0], best)
        rows = {t["id"]: t for t in listed}
        self.assertEqual(len(rows), 12)
        t65 = rows[by_xy[(6, 2)]]
        self.assertIs(t65["feasible"], False)
        self.assertEqual(t65["violation"], {"x <= 4": 2, "x * y <= 7": 5})

        r = c.cgq("results", j, "--format", "csv")
        rows = list(csv.DictReader(io.StringIO(r.stdout)))
        self.assertEqual(len(rows), 12)
        for row in rows:
            want = violation(int(row["params.x"]), int(row["params.y"]))
            self.assertEqual(row["feasible"], "0" if want else "1", row)
            self.assertEqual(json.loads(row["violation"]) if row["violation"] else {}, want)

        r = c.cgq("results", j)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        head = lines[0].split()
        self.assertEqual(head[:5], ["trial", "state", "x", "feasible", "violation"], r.stdout)
        cells = {int(ln.split()[0]): ln.split() for ln in lines[1:] if ln.split()[0].isdigit()}
        self.assertEqual(cells[by_xy[(6, 2)]][3:5], ["no", "5"], r.stdout)
        self.assertEqual(cells[best][3:5], ["yes", "-"], r.stdout)

        # Two objectives: the unconstrained front would be (6, 2) alone.
        j2 = c.submit(c.write_file("two.yaml", TWO))
        job = c.wait_job(j2, 60)
        self.assertEqual((job.get("state"), job.get("succeeded")), ("finished", "12"), job)
        trials = c.trials(j2)
        xy = {t: (params_of(h)["x"], params_of(h)["y"]) for t, h in trials.items()}
        kept = c.redis.hgetall("cgq:job:{%d}:pareto" % j2)
        self.assertEqual(sorted(xy[int(t)] for t in kept), [(4, 2), (5, 1)])
        r = c.cgq("pareto", j2, "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(xy[t["id"]] for t in json.loads(r.stdout)["trials"]),
                         [(4, 2), (5, 1)])
        self.assertIn("3 infeasible trials left out", r.stderr)
        r = c.cgq("pareto", j2)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("3 infeasible trials left out", r.stdout)
        r = c.cgq("pareto", j2, "--all", "--format", "json")
        self.assertEqual(len(json.loads(r.stdout)["trials"]), 9)  # the feasible ones


if __name__ == "__main__":
    main()
