#!/usr/bin/env python3
"""a. A 3x4 grid of command trials on two workers: every point runs exactly
once, and the leaderboard, the job's best and `cgq results` agree with the
trial hashes."""

import itertools
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, fnum, main, metrics_of, params_of  # noqa: E402

SCRIPT = r'''
import json, os, sys, time
a, b = int(sys.argv[1]), int(sys.argv[2])
p = json.loads(os.environ["CGQ_PARAMS"])
assert p == {"a": a, "b": b}, (p, a, b)
assert os.environ["CGQ_PARAM_A"] == str(a) and os.environ["CGQ_PARAM_B"] == str(b)
# the rest of the trial process contract (docs/architecture.md)
env = os.environ
assert env["CGQ_REPORT_FD"] == "3", env.get("CGQ_REPORT_FD")
assert os.path.samefile(env["CGQ_TRIAL_DIR"], os.getcwd()), (env["CGQ_TRIAL_DIR"], os.getcwd())
assert env["CGQ_TRIAL_DIR"].endswith("/job-%s/trial-%s/attempt-%s" % (
    env["CGQ_JOB_ID"], env["CGQ_TRIAL_ID"], env["CGQ_ATTEMPT"])), env["CGQ_TRIAL_DIR"]
assert env["CGQ_ATTEMPT"] == "1"
assert os.path.isfile(os.path.join(env["CGQ_SPEC_DIR"], "score.py"))
assert env.get("CUDA_VISIBLE_DEVICES") == "", "CUDA_VISIBLE_DEVICES=%r" % env.get("CUDA_VISIBLE_DEVICES")
assert env["GRID_TAG"] == "t%d-%s" % (a, env["CGQ_TRIAL_ID"]), env.get("GRID_TAG")
time.sleep(0.2)
score = 100 - (a - 2) ** 2 * 10 - (b - 30) ** 2 / 10.0
with os.fdopen(int(os.environ.get("CGQ_REPORT_FD", "1")), "w") as f:
    f.write(json.dumps({"step": 1, "score": score / 2}) + "\n")
    f.write(json.dumps({"step": 2, "score": score, "a_times_b": a * b}) + "\n")
'''

SPEC = '''name: grid-itest
space:
  a: {grid: [1, 2, 3]}
  b: {grid: [10, 20, 30, 40]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/score.py {a} {b}
  resources: {cpu: 1}
  timeout: 1m
  env: {GRID_TAG: "t{a}-{trial_id}"}
'''


def expected_score(a, b):
    return 100 - (a - 2) ** 2 * 10 - (b - 30) ** 2 / 10.0


class GridTest(CgqTestCase):
    def test_grid_two_workers(self):
        c = self.start_default(workers=(("w1", 2), ("w2", 2)))
        c.write_file("score.py", SCRIPT)
        j = c.submit(c.write_file("grid.yaml", SPEC))
        job = c.wait_job(j, 90)

        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("total"), "12", job)
        self.assertEqual(job.get("succeeded"), "12", job)
        for k in ("failed", "running", "pending", "cancelled", "unschedulable"):
            self.assertIn(job.get(k, "0"), ("0", ""), "job field %s: %s" % (k, job))

        trials = c.trials(j)
        self.assertEqual(sorted(trials), list(range(12)), "trial ids")
        seen = []
        nodes = set()
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
            self.assertEqual(h.get("attempt"), "1", "trial %d: %s" % (t, h))
            p = params_of(h)
            seen.append((p["a"], p["b"]))
            want = expected_score(p["a"], p["b"])
            self.assertAlmostEqual(fnum(h.get("value")), want, 9, "trial %d value: %s" % (t, h))
            m = metrics_of(h)
            self.assertAlmostEqual(m.get("score"), want, 9, "trial %d metrics: %s" % (t, h))
            self.assertEqual(m.get("a_times_b"), p["a"] * p["b"], "trial %d metrics: %s" % (t, h))
            nodes.add(h.get("node"))
            st, fin = fnum(h.get("started")), fnum(h.get("finished"))
            self.assertTrue(st and fin and fin >= st + 0.2, "trial %d times: %s" % (t, h))
            self.assertTrue(h.get("trial_dir", "").endswith("/job-%d/trial-%d/attempt-1" % (j, t)),
                            "trial %d trial_dir: %s" % (t, h))
            self.assertTrue(os.path.isdir(h["trial_dir"]), h["trial_dir"])
        self.assertEqual(sorted(seen), sorted(itertools.product([1, 2, 3], [10, 20, 30, 40])),
                         "every grid point exactly once")
        self.assertEqual(nodes, {"w1", "w2"}, "both workers ran trials")

        # grid order: first written param varies slowest (common/space.h)
        order = [(params_of(trials[t])["a"], params_of(trials[t])["b"]) for t in range(12)]
        self.assertEqual(order, list(itertools.product([1, 2, 3], [10, 20, 30, 40])),
                         "trial i is grid point i")

        best_t = max(trials, key=lambda t: fnum(trials[t]["value"]))
        best_v = fnum(trials[best_t]["value"])
        lb = c.redis.cmd("ZREVRANGE", "cgq:job:{%d}:leaderboard" % j, 0, -1, "WITHSCORES")
        self.assertEqual(len(lb), 24, "leaderboard holds all 12 trials: %s" % lb)
        self.assertEqual(int(lb[0]), best_t, "leaderboard top: %s" % lb[:6])
        self.assertAlmostEqual(float(lb[1]), best_v, 9)
        lb_scores = dict(zip(map(int, lb[0::2]), map(float, lb[1::2])))
        for t, h in trials.items():
            self.assertAlmostEqual(lb_scores[t], fnum(h["value"]), 9, "leaderboard score of %d" % t)
        self.assertEqual(job.get("best_trial"), str(best_t), job)
        self.assertAlmostEqual(fnum(job.get("best_value")), best_v, 9, job)

        # reports stream of the best trial: both lines, in order
        reports = c.redis.xrange("cgq:job:{%d}:reports:%d" % (j, best_t))
        self.assertEqual([json.loads(e["r"])["step"] for e in reports], [1, 2], reports)

        # events: one trial.succeeded per trial, one job.finished
        ev = c.events(j)
        succ = sorted(int(e["trial"]) for e in ev if e.get("type") == "trial.succeeded")
        self.assertEqual(succ, list(range(12)), "trial.succeeded events")
        self.assertEqual(len([e for e in ev if e.get("type") == "job.finished"]), 1)

        # the CLI agrees
        r = c.cgq("results", j, "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        try:
            doc = json.loads(r.stdout)
        except ValueError as e:
            self.fail("cgq results --format json is not JSON (%s): %r" % (e, r.stdout[:500]))
        rows = doc.get("trials", doc.get("results")) if isinstance(doc, dict) else doc
        self.assertIsInstance(rows, list, "results JSON: %r" % r.stdout[:500])
        got = {}
        for row in rows:
            tid = row.get("trial", row.get("id", row.get("trial_id")))
            val = row.get("value")
            if val is None:
                val = (row.get("metrics") or {}).get("score")
            got[int(tid)] = float(val)
        self.assertEqual(sorted(got), list(range(12)), "trials in cgq results: %r" % r.stdout[:500])
        for t, v in got.items():
            self.assertAlmostEqual(v, fnum(trials[t]["value"]), 9, "cgq results value of %d" % t)
        self.assertEqual(max(got, key=got.get), best_t, "best trial in cgq results")
        ordered = [got[int(row.get("trial", row.get("id", row.get("trial_id"))))] for row in rows]
        self.assertEqual(ordered, sorted(ordered, reverse=True), "cgq results: best first")

        r = c.cgq("status", j)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("finished", r.stdout)


if __name__ == "__main__":
    main()
