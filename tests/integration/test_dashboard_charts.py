#!/usr/bin/env python3
"""The job page's charts, against a real cluster: the chart API
(/api/jobs/ID/progress, curves, importance, sample) compared with what
Redis and `cgq results` hold, and the charts in Debian's headless Chromium
(over the DevTools protocol, test_dashboard_browser.py's client): the
best-so-far curve ends at the job's best; the learning curves are the top
trials'; importance puts the param that sets the objective first; parallel
coordinates draw one line per succeeded trial of the page; the Pareto
scatter of a two-objective job has exactly one front mark per trial in
cgq:job:{J}:pareto; a trial page charts its reports by step; and hovering one (a real mouse move) shows its trial
id; param values and metric names that hold HTML stay text; no script
error. The browser part is skipped, saying why, without chromium."""

import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, free_port, main  # noqa: E402
from test_dashboard_api import request  # noqa: E402
from test_dashboard_browser import Browser, chromium  # noqa: E402

XSS = "<img src=x onerror=alert(1)>"

# v is set by a alone (b is noise it ignores); three reports with a step,
# the last the result; an extra metric whose name is HTML.
TRIAL = r'''
import json, os, sys
a, b = int(sys.argv[1]), sys.argv[2]
if a == 5 and b == "y":
    sys.exit(3)
for step in (1, 2, 3):
    r = {"step": step, "v": a * 10 * step / 3.0, "<b>m</b>": 1}
    os.write(3, (json.dumps(r) + "\n").encode())
'''

ONE = '''name: charts-one
space:
  a: {grid: [0, 1, 2, 3, 4, 5]}
  b: {grid: ["x", "y", "%s"]}
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/t.py {a} {b}
  resources: {cpu: 1}
''' % XSS

TWO = r'''
import json, os, sys
i = int(sys.argv[1])
os.write(3, (json.dumps({"x": i %% 4, "y": 3 - i %% 4 - (i // 4)}) + "\n").encode())
'''.replace("%%", "%")

TWO_SPEC = '''name: charts-two
space:
  i: {grid: [0, 1, 2, 3, 4, 5, 6, 7]}
objectives: [{metric: x, mode: max}, {metric: y, mode: max}]
trial:
  command: python3 {spec_dir}/two.py {i}
  resources: {cpu: 1}
'''


class DashboardChartsTest(CgqTestCase):

    def get_json(self, path, want=200):
        status, headers, body = request(self.port, path)
        self.assertEqual(status, want, "%s: %s" % (path, body))
        self.assertEqual(headers.get("content-type"), "application/json", path)
        return json.loads(body)

    def start(self):
        c = self.cluster
        c.start_redis()
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        c.start_worker("w1", cpus=2)
        c.write_file("t.py", TRIAL)
        c.write_file("two.py", TWO)
        one = c.submit(c.write_file("one.yaml", ONE))
        two = c.submit(c.write_file("two.yaml", TWO_SPEC))
        c.wait_job(one, timeout=120)
        c.wait_job(two, timeout=60)
        return one, two

    def results(self, j):
        r = self.cluster.cgq("results", str(j), "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def check_api(self, one, two):
        c = self.cluster
        res = self.results(one)
        ranked = [t for t in res["trials"] if t["state"] == "succeeded"]
        self.assertEqual(len(ranked), 17)
        h = c.job(one)

        # Best so far: improvements in finish order, ending at the job's best.
        prog = self.get_json("/api/jobs/%d/progress" % one)
        self.assertEqual(prog["done"], 17)
        self.assertEqual(prog["metric"], "v")
        pts = prog["points"]
        self.assertEqual(pts[-1]["value"], float(h["best_value"]))
        # Two trials reach 50: the curve's last point is the first to finish
        # with it, as is the job's best (finish order within a loop turn
        # may differ from the order the coordinator applied them: either).
        self.assertIn(pts[-1]["trial"], [t["id"] for t in ranked
                                         if t["metrics"]["v"] == pts[-1]["value"]])
        vals = [p["value"] for p in pts]
        self.assertEqual(vals, sorted(set(vals)), "each point improves on the one before")
        self.assertEqual([p["n"] for p in pts], sorted(p["n"] for p in pts))
        fin = {t["id"]: t["finished"] for t in ranked}
        for p in pts:  # each improvement is the best of those finished by then
            before = [t["metrics"]["v"] for t in ranked if fin[t["id"]] <= fin[p["trial"]]]
            self.assertEqual(p["value"], max(before))

        # Learning curves: the top K of cgq results' order, from the reports.
        cur = self.get_json("/api/jobs/%d/curves?limit=3" % one)
        self.assertEqual([t["trial"] for t in cur["trials"]], [t["id"] for t in ranked[:3]])
        for t in cur["trials"]:
            self.assertEqual(t["x"], "step")
            self.assertEqual([p[0] for p in t["points"]], [1, 2, 3])
            self.assertAlmostEqual(t["points"][-1][1], t["value"])
        self.assertEqual(len(self.get_json("/api/jobs/%d/curves" % one)["trials"]), 5)
        for bad in ("0", "21", "x", "-1", "9" * 30):
            self.get_json("/api/jobs/%d/curves?limit=%s" % (one, bad), want=400)
            self.get_json("/api/jobs/%d/sample?limit=%s" % (one, bad if bad != "21" else "501"),
                          want=400)
        self.get_json("/api/jobs/99/progress", want=404)

        # Importance: a sets v, b is noise.
        imp = self.get_json("/api/jobs/%d/importance" % one)
        self.assertEqual(imp["trials"], 17)
        self.assertFalse(imp["sampled"])
        self.assertIn("epsilon-squared", imp["method"])
        self.assertEqual([p["name"] for p in imp["params"]], ["a", "b"])
        self.assertGreater(imp["params"][0]["eps2"], 0.9)
        self.assertLess(imp["params"][1]["eps2"], 0.1)
        self.assertTrue(imp["params"][0]["numeric"])
        self.assertFalse(imp["params"][1]["numeric"])
        # 17 trials in several bins of a: rough, and said so; b's 2 values are not.
        self.assertTrue(imp["params"][0]["rough"], imp)
        self.assertFalse(imp["params"][1]["rough"], imp)
        self.assertRegex(imp["warning"] or "", r"^few trials per group for a \(\d+\.\d per bin\):")

        # The sample: succeeded trials spread over the ids, whole job when small.
        sam = self.get_json("/api/jobs/%d/sample?limit=500" % one)
        self.assertEqual(sorted(t["id"] for t in sam["trials"]), sorted(t["id"] for t in ranked))
        self.assertEqual(len(self.get_json("/api/jobs/%d/sample?limit=4" % one)["trials"]) <= 4,
                         True)

        # A two-objective job: no single objective, so no best curve; the
        # sample holds its metrics for the scatter.
        self.assertEqual(self.get_json("/api/jobs/%d/progress" % two)["points"], [])
        sam = self.get_json("/api/jobs/%d/sample" % two)
        self.assertEqual(len(sam["trials"]), 8)
        self.assertEqual(set(sam["trials"][0]["metrics"]), {"x", "y"})

    def test_charts(self):
        c = self.cluster
        one, two = self.start()
        self.check_api(one, two)
        if chromium() is None:
            raise unittest.SkipTest("chromium is not installed (apt-get install chromium; "
                                    "scripts/bootstrap does); the API was checked")
        h = c.job(one)
        b = Browser(self.tmp)
        try:
            b.call("Page.navigate", url=self.base + "/jobs/%d" % one)
            last = b.wait("(() => { const p = document.querySelectorAll('#best-chart circle');"
                          " return p.length ? [p.length, p[p.length-1].dataset.trial,"
                          " Number(p[p.length-1].dataset.value)] : null })()",
                          lambda v: v is not None, 15, "the best-so-far curve")
            self.assertEqual(last[2], float(h["best_value"]))
            prog = self.get_json("/api/jobs/%d/progress" % one)
            self.assertEqual(int(last[1]), prog["points"][-1]["trial"])
            self.assertEqual(last[0], len(prog["points"]))
            self.assertEqual(b.eval("document.querySelector('#best-chart .xlabel').textContent"),
                             "trials succeeded, in finish order")
            self.assertEqual(b.eval("document.querySelector('#best-chart .ylabel').textContent"),
                             "best v (max)")
            curves = b.wait("[...document.querySelectorAll('#curves-chart polyline')]"
                            ".map(p => Number(p.dataset.trial))", lambda v: v, 5,
                            "the learning curves")
            top = [t["id"] for t in self.results(one)["trials"]][:5]
            self.assertEqual(curves, top)
            bars = b.wait("[...document.querySelectorAll('#importance-chart .bar-row')]"
                          ".map(g => g.dataset.param)", lambda v: v, 5, "importance bars")
            self.assertEqual(bars, ["a", "b"])
            self.assertIn("epsilon-squared",
                          b.eval("document.getElementById('importance-note').textContent"))
            lines = b.wait("document.querySelectorAll('#parallel-chart polyline').length",
                           lambda v: v, 5, "parallel coordinates")
            self.assertEqual(lines, 17)
            # Paged on the server: top 20 of 17 is one page.
            self.assertEqual(b.eval("document.getElementById('pc-range').textContent"),
                             "ranks 1\u201317 of 17")
            # The HTML param value is an axis label, as text; no <img> anywhere.
            self.assertGreaterEqual(
                b.eval("[...document.querySelectorAll('#parallel-chart text')]"
                       ".filter(t => t.textContent === %s).length" % json.dumps(XSS)), 1)
            self.assertEqual(b.eval("document.getElementsByTagName('img').length"), 0)
            self.assertEqual(b.eval("document.getElementsByTagName('b').length"), 0)
            # The metric named in HTML is a leaderboard header, as text.
            self.assertEqual(b.eval("[...document.querySelectorAll('#trials th')]"
                                    ".filter(t => t.textContent === '<b>m</b>').length"), 1)
            self.assertTrue(b.eval("document.getElementById('pareto-section').hidden"))
            b.eval("1")
            self.assertEqual(b.problems(), [])

            # A trial's page: its reports as charts, one a numeric key, by step.
            best = self.results(one)["trials"][0]["id"]
            b.call("Page.navigate", url=self.base + "/jobs/%d/trials/%d" % (one, best))
            lines = b.wait("[...document.querySelectorAll('#reports-chart polyline')]"
                           ".map(p => [p.dataset.metric, Number(p.dataset.points)])",
                           lambda v: v, 10, "the reports' charts")
            self.assertEqual(lines, [["<b>m</b>", 3], ["v", 3]])
            self.assertEqual(b.eval("[...document.querySelectorAll('#reports-chart .xlabel')]"
                                    ".map(t => t.textContent)"), ["step", "step"])
            self.assertEqual(b.eval("document.getElementsByTagName('b').length"), 0)

            # The two-objective job: one front mark per trial of the pareto hash.
            front = sorted(int(t) for t in c.redis.cmd("HKEYS", "cgq:job:{%d}:pareto" % two))
            self.assertTrue(front)
            b.call("Page.navigate", url=self.base + "/jobs/%d" % two)
            marks = b.wait("[...document.querySelectorAll('#pareto-chart circle.front')]"
                           ".map(c => Number(c.dataset.trial))", lambda v: v, 15,
                           "the Pareto scatter")
            self.assertEqual(sorted(marks), front)
            others = b.eval("[...document.querySelectorAll('#pareto-chart circle.pt')]"
                            ".map(c => Number(c.dataset.trial))")
            self.assertEqual(sorted(marks + others), list(range(8)))
            self.assertEqual(b.eval("[...document.querySelectorAll('#pareto-chart .xlabel,"
                                    " #pareto-chart .ylabel')].map(t => t.textContent)"),
                             ["x", "y"])
            self.assertTrue(b.eval("document.getElementById('best-section').hidden"))
            # A real mouse move onto a front mark shows its trial.
            t = front[-1]
            xy = b.eval("(() => { const c = document.querySelector("
                        "'#pareto-chart circle.front[data-trial=\"%d\"]');"
                        " c.scrollIntoView({block: 'center'}); const r = c.getBoundingClientRect();"
                        " return [r.x + r.width / 2, r.y + r.height / 2] })()" % t)
            b.call("Input.dispatchMouseEvent", type="mouseMoved", x=xy[0], y=xy[1])
            b.wait("document.getElementById('pareto-info').textContent",
                   lambda v: v.startswith("trial %d: " % t) and "on the front" in v, 3,
                   "hovering front trial %d to show it" % t)
            self.assertEqual(
                b.eval("document.querySelector('#pareto-chart circle.front[data-trial=\"%d\"]"
                       " title').textContent" % t).split(":")[0], "trial %d" % t)
            time.sleep(0.3)
            b.eval("1")  # drain the events that came meanwhile
            self.assertEqual(b.problems(), [])
        finally:
            b.close()

    def test_long_streams(self):
        """Curves of trials with long report streams, written into Redis as
        the coordinator writes them: 5,000 reports are sampled by time
        (at most 200 points, first and last kept, in order), 1,500 are read
        whole and thinned to at most 200, 100 without a step are read whole,
        by place; the best curve of 3,000 trials whose
        every trial improves stays at most 1,000 points, ending at the best."""
        c = self.cluster
        c.start_redis()
        self.port = free_port()
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        now = time.time()
        n = 3000
        c.redis.pipeline([
            ("HSET", "cgq:job:{1}", "id", 1, "name", "long", "state", "finished",
             "suggested", n, "total", n, "objective_metric", "v", "objective_mode", "max",
             "created", now - 3600, "finished", now, "succeeded", n, "spec", "name: long"),
            ("ZADD", "cgq:jobs", now - 3600, 1)])
        batch = []
        for i in range(n):  # trial i has v = i: each one improves the best
            batch.append(("HSET", "cgq:job:{1}:trial:%d" % i, "id", i, "job", 1,
                          "state", "succeeded", "params", json.dumps({"a": i % 7}),
                          "metrics", json.dumps({"v": i}), "value", i,
                          "finished", now - 3600 + i))
        c.redis.pipeline(batch)
        t0 = 1700000000000
        big = [("XADD", "cgq:job:{1}:reports:%d" % (n - 1), "%d-0" % (t0 + 7 * i), "r",
                json.dumps({"step": i + 1, "v": i + 1})) for i in range(5000)]
        small = [("XADD", "cgq:job:{1}:reports:%d" % (n - 2), "%d-0" % (t0 + i), "r",
                  json.dumps({"v": 2 * i})) for i in range(100)]
        mid = [("XADD", "cgq:job:{1}:reports:%d" % (n - 3), "%d-0" % (t0 + i), "r",
                json.dumps({"epoch": i + 1, "v": i})) for i in range(1500)]
        c.redis.pipeline(big + small + mid)

        cur = self.get_json("/api/jobs/1/curves?limit=3")
        self.assertEqual([t["trial"] for t in cur["trials"]], [n - 1, n - 2, n - 3])
        # 1,500 reports: read whole, every k-th kept and the last, at most 200.
        mid_pts = cur["trials"][2]["points"]
        self.assertEqual(cur["trials"][2]["x"], "epoch")
        self.assertLessEqual(len(mid_pts), 200)
        self.assertEqual(mid_pts[0], [1, 0])
        self.assertEqual(mid_pts[-1], [1500, 1499])
        pts = cur["trials"][0]["points"]
        self.assertLessEqual(len(pts), 200)
        self.assertGreater(len(pts), 150)
        self.assertEqual(pts[0], [1, 1])
        self.assertEqual(pts[-1], [5000, 5000])
        xs = [p[0] for p in pts]
        self.assertEqual(xs, sorted(set(xs)), "in order, no report twice")
        self.assertTrue(all(p[0] == p[1] for p in pts))
        small_pts = cur["trials"][1]["points"]
        self.assertEqual(cur["trials"][1]["x"], "report")
        self.assertEqual(small_pts, [[i + 1, 2 * i] for i in range(100)])

        prog = self.get_json("/api/jobs/1/progress")
        self.assertEqual(prog["done"], n)
        self.assertLessEqual(len(prog["points"]), 1000)
        self.assertEqual(prog["points"][-1], {"n": n, "t": now - 3600 + n - 1,
                                              "trial": n - 1, "value": n - 1})
        imp = self.get_json("/api/jobs/1/importance")
        self.assertEqual(imp["trials"], n)
        self.assertEqual(imp["params"][0]["name"], "a")
        self.assertIsNone(imp["warning"], "enough trials per group")
        self.assertFalse(any(p["rough"] for p in imp["params"]))

        # An ended job's answers are kept: a trial changed behind the job's
        # back (its counts the same) is not seen; counts that change are.
        c.redis.cmd("HSET", "cgq:job:{1}:trial:0", "value", 10 ** 6)
        self.assertEqual(self.get_json("/api/jobs/1/progress"), prog)
        c.redis.cmd("HSET", "cgq:job:{1}", "stopped", 1)
        prog2 = self.get_json("/api/jobs/1/progress")
        self.assertEqual(prog2["points"][-1]["value"], 10 ** 6)
        self.assertNotEqual(self.get_json("/api/jobs/1/curves?limit=1"), cur)


if __name__ == "__main__":
    main()
