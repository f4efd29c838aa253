#!/usr/bin/env python3
"""Seed 002 end to end: an assignment space of 5 operators x 2 backends,
searched by grid (all 32 ids), each trial a fake profiler whose time and
memory are a deterministic function of the decoded assignment. The job's
objectives are time and memory, both minimised; the coordinator keeps the
Pareto front in cgq:job:{J}:pareto, and `cgq pareto` prints it as seed 002's
dump, JSON, CSV, a table and an SVG plot. Every output is checked against a
front computed here, independently, from the same cost tables."""

import csv
import io
import json
import os
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main  # noqa: E402

ITEMS = ["Pool2D", "BinaryArithmetic", "DepthwiseConv2D", "Conv2D", "Reshape"]
CHOICES = ["cpu", "acl_cl"]
# Per operator and backend: milliseconds and KiB. The GPU backend is faster
# and costs memory, a lot for the heavy operators, a little for the rest.
TIME = {"Pool2D": (3.25, 2.5), "BinaryArithmetic": (2.0, 1.25), "DepthwiseConv2D": (20.5, 6.25),
        "Conv2D": (41.0, 9.5), "Reshape": (0.5, 0.75)}
MEMORY = {"Pool2D": (1200, 9000), "BinaryArithmetic": (800, 900), "DepthwiseConv2D": (5000, 70000),
          "Conv2D": (9000, 250000), "Reshape": (100, 2500)}
BASE_MEMORY = 56000

PROFILER = r'''
import json, os, sys
p = json.loads(os.environ["CGQ_PARAMS"])["backends"]
TIME, MEMORY = %r, %r
t = sum(TIME[op][CHOICES.index(b)] for op, b in p["map"].items())
m = %d + sum(MEMORY[op][CHOICES.index(b)] for op, b in p["map"].items())
# Odd ids report memory as 78900.0, as some tools write whole numbers
os.write(3, (json.dumps({"id": p["id"], "time": round(t, 3),
                         "memory": float(m) if p["id"] & 1 else m}) + "\n").encode())
'''.replace("CHOICES", repr(CHOICES))

SPEC = '''name: seed002-itest
space:
  backends:
    assignment:
      items: [%s]
      choices: [%s]
search: {algorithm: grid}
objectives: [{metric: time, mode: min}, {metric: memory, mode: min}]
trial:
  command: python3 {spec_dir}/profile.py
  resources: {cpu: 1}
''' % (", ".join(ITEMS), ", ".join(CHOICES))


def profile(aid):
    """time and memory of assignment id: digit k (base 2, least significant
    first) picks item k's backend (docs/spec.md, Assignments)."""
    picks = [(aid >> k) & 1 for k in range(len(ITEMS))]
    t = round(sum(TIME[op][c] for op, c in zip(ITEMS, picks)), 3)
    m = BASE_MEMORY + sum(MEMORY[op][c] for op, c in zip(ITEMS, picks))
    return t, m


def front(points):
    """ids of the points no other point dominates (both minimised)."""
    out = []
    for i, (t, m) in points.items():
        if not any((t2 <= t and m2 <= m) and (t2 < t or m2 < m) for t2, m2 in points.values()):
            out.append(i)
    return sorted(out)


class Seed002Test(CgqTestCase):
    def test_assignment_grid_pareto(self):
        c = self.start_default(workers=(("w1", 2), ("w2", 2)))
        c.write_file("profile.py", PROFILER % (TIME, MEMORY, BASE_MEMORY))
        j = c.submit(c.write_file("seed002.yaml", SPEC))
        job = c.wait_job(j, 120)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual((job.get("total"), job.get("succeeded")), ("32", "32"), job)

        points = {aid: profile(aid) for aid in range(32)}
        want = front(points)
        self.assertTrue(2 < len(want) < 32, "a front that can tell: %s" % want)

        # Every id profiled once (grid over the assignment walks 0..31).
        ids = sorted(json.loads(h["params"])["backends"]["id"] for h in c.trials(j).values())
        self.assertEqual(ids, list(range(32)))

        # The coordinator's front in Redis: trial id -> objective values.
        kept = c.redis.hgetall("cgq:job:{%d}:pareto" % j)
        trials = c.trials(j)
        aid_of = {t: json.loads(h["params"])["backends"]["id"] for t, h in trials.items()}
        self.assertEqual(sorted(aid_of[int(t)] for t in kept), want, kept)
        for t, v in kept.items():
            self.assertEqual(json.loads(v), dict(zip(("time", "memory"), points[aid_of[int(t)]])))

        # seed 002's dump: oplist, solutions {id, time, memory} ordered by id.
        r = c.cgq("pareto", j, "--format", "seed002")
        self.assertEqual(r.returncode, 0, r.stderr)
        dump = json.loads(r.stdout)
        self.assertEqual(dump["oplist"], ITEMS)
        self.assertEqual([s["id"] for s in dump["solutions"]], want)
        for s in dump["solutions"]:
            self.assertEqual((s["time"], s["memory"]), points[s["id"]], s)
            self.assertIsInstance(s["memory"], int, "memory as reported, an integer: %s" % s)
        # The random sampler's dump: configs as its env lines, exec_time and max_rss.
        r = c.cgq("pareto", j, "--format", "seed002-sampler")
        self.assertEqual(r.returncode, 0, r.stderr)
        dump = json.loads(r.stdout)
        self.assertEqual(sorted(dump), ["configs", "mode", "oplist", "solutions"])
        self.assertEqual((dump["oplist"], dump["mode"]), (ITEMS, "name"))
        self.assertEqual([s["id"] for s in dump["solutions"]], want)
        for s in dump["solutions"]:
            self.assertEqual(sorted(s), ["exec_time", "id", "max_rss"])
            self.assertEqual((s["exec_time"], s["max_rss"]), points[s["id"]], s)
            self.assertIsInstance(s["max_rss"], int, s)
        self.assertEqual(sorted(dump["configs"]), sorted(str(i) for i in want))
        for aid in want:
            picks = [(aid >> k) & 1 for k in range(len(ITEMS))]
            self.assertEqual(dump["configs"][str(aid)], 'BACKENDS="cpu;acl_cl" ' + "".join(
                "OP_BACKEND_%s=%s " % (op, CHOICES[c]) for op, c in zip(ITEMS, picks)))
        # --all: the whole brute-force dump, as the seed's profiler writes it.
        r = c.cgq("pareto", j, "--format", "seed002", "--all")
        self.assertEqual(r.returncode, 0, r.stderr)
        dump = json.loads(r.stdout)
        self.assertEqual({s["id"]: (s["time"], s["memory"]) for s in dump["solutions"]}, points)

        # json: the non-dominated trials with params and metrics, best time first.
        r = c.cgq("pareto", j, "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["job"], j)
        self.assertEqual(doc["objectives"], [{"metric": "time", "mode": "min"},
                                             {"metric": "memory", "mode": "min"}])
        got = [t["params"]["backends"]["id"] for t in doc["trials"]]
        self.assertEqual(sorted(got), want)
        self.assertEqual(got, sorted(want, key=lambda a: points[a]), "ordered by time")
        for t in doc["trials"]:
            self.assertEqual(aid_of[t["id"]], t["params"]["backends"]["id"])
            self.assertEqual((t["metrics"]["time"], t["metrics"]["memory"]),
                             points[t["params"]["backends"]["id"]])

        # csv: id,time,memory,backends
        r = c.cgq("pareto", j, "--format", "csv")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = list(csv.reader(io.StringIO(r.stdout)))
        self.assertEqual(rows[0], ["id", "time", "memory", "backends"])
        self.assertEqual(sorted(json.loads(row[3])["id"] for row in rows[1:]), want)
        for row in rows[1:]:
            self.assertEqual((float(row[1]), float(row[2])), points[json.loads(row[3])["id"]])

        # table and plot: the front's trial ids, and an SVG with every point.
        svg = os.path.join(c.tmp, "front.svg")
        r = c.cgq("pareto", j, "--plot", svg)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().splitlines()
        self.assertRegex(lines[0], r"^\s*trial\s+time \(minimize\)\s+memory \(minimize\)\s+backends")
        self.assertEqual(len(lines), 1 + len(want), r.stdout)
        tree = ET.parse(svg)
        ns = {"s": "http://www.w3.org/2000/svg"}
        groups = {g.get("data-name"): g for g in tree.getroot().findall("s:g", ns)
                  if g.get("class") == "series"}
        self.assertEqual(len(groups["dominated"].findall("s:circle", ns)), 32 - len(want))
        self.assertEqual(len(groups["Pareto front"].findall("s:circle", ns)), len(want))
        texts = [t.text for t in tree.getroot().iter("{http://www.w3.org/2000/svg}text")]
        self.assertIn("time (minimize)", texts)
        self.assertIn("memory (minimize)", texts)

        # An unknown job: exit 2.
        r = c.cgq("pareto", j + 1)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)


if __name__ == "__main__":
    main()
