#!/usr/bin/env python3
"""Early stopping on synthetic learning curves: a trial reports
{"epoch": e, "loss": final + 1.5/e} for e = 1..max, final a known function of
its params.

- asha on 27 configurations, 4 at a time: most trials are stopped before
  max (their processes really end), the true best configuration is not,
  each decision is in the events stream, counts add up to the total.
- asha across a kill -9 of the coordinator: the rung records come back from
  Redis, so the first trial judged after the restart is judged against the
  records made before it.
- median: one trial at a time, so the decisions are deterministic; they are
  compared with the median stopping rule implemented here, independently.
"""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, endpoint_port, fnum, main, metrics_of, params_of  # noqa: E402

CURVE = r'''
import json, os, sys, time
final = FINALS[int(os.environ["CGQ_PARAM_Q"])]
delay, last = float(sys.argv[1]), int(sys.argv[2])
tid = os.environ["CGQ_TRIAL_ID"]
for e in range(1, last + 1):
    time.sleep(delay)
    os.write(3, (json.dumps({"epoch": e, "loss": final + 1.5 / e}) + "\n").encode())
    with open(sys.argv[3], "a") as f:
        f.write("%s %d\n" % (tid, e))
'''


def asha_final(q):
    # A permutation of 0..26: the best (0) is q = 2, not the first trial.
    return ((11 * q + 5) % 27) / 10.0


ASHA_SPEC = '''name: asha-itest
space:
  q: {grid: [%s]}
search: {algorithm: grid}
objective: {metric: loss, mode: min}
early_stop: {algorithm: asha, attribute: epoch, grace: 1, reduction: 3, max: 27}
trial:
  command: python3 {spec_dir}/curve.py %s 27 {spec_dir}/epochs.txt
  resources: {cpu: 1}
'''


def epochs_run(c):
    """trial id -> the highest epoch its process reached."""
    out = {}
    path = os.path.join(c.specdir, "epochs.txt")
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            t, e = map(int, line.split())
            out[t] = max(out.get(t, 0), e)
    return out


def last_report(c, j, t):
    ev = c.redis.xrange("cgq:job:{%d}:reports:%d" % (j, t))
    return json.loads(ev[-1]["r"]) if ev else None


class AshaTest(CgqTestCase):
    def _submit(self, c, qs, delay, finals, extra=""):
        c.write_file("curve.py", CURVE.replace("FINALS", repr(finals)))
        spec = ASHA_SPEC % (", ".join(map(str, qs)), delay)
        if extra:
            spec = spec.replace("search: {algorithm: grid}", "search: {algorithm: grid, %s}" % extra)
        return c.submit(c.write_file("asha.yaml", spec))

    def test_asha_27_configs(self):
        c = self.start_default(workers=(("w1", 2), ("w2", 2)))
        finals = [asha_final(q) for q in range(27)]
        j = self._submit(c, list(range(27)), 0.03, finals)
        job = c.wait_job(j, 150)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("total"), "27", job)
        ok, stopped = int(job.get("succeeded", 0)), int(job.get("stopped", 0))
        self.assertEqual(ok + stopped, 27, "succeeded + stopped = total: %s" % job)
        self.assertGreaterEqual(stopped, 14, "most trials stop before max: %s" % job)

        trials = c.trials(j)
        best = min(range(27), key=lambda q: finals[q])
        by_q = {params_of(h)["q"]: t for t, h in trials.items()}
        self.assertEqual(trials[by_q[best]].get("state"), "succeeded",
                         "the true best configuration ran to the end: %s" % trials[by_q[best]])
        self.assertEqual(job.get("best_trial"), str(by_q[best]), job)
        self.assertAlmostEqual(fnum(job.get("best_value")), finals[best] + 1.5 / 27, 9)

        ran = epochs_run(c)
        ev = c.events(j)
        for t, h in trials.items():
            ends = [e for e in ev if e.get("trial") == str(t) and e.get("type") in
                    ("trial.succeeded", "trial.failed", "trial.cancelled", "trial.early_stopped")]
            self.assertEqual(len(ends), 1, "trial %d ends exactly once: %s" % (t, ends))
            m = metrics_of(h)
            if h.get("state") == "succeeded":
                self.assertEqual(m.get("epoch"), 27, "trial %d: %s" % (t, h))
                continue
            self.assertEqual(h.get("state"), "stopped", "trial %d: %s" % (t, h))
            self.assertEqual(ends[0]["type"], "trial.early_stopped")
            self.assertRegex(ends[0].get("detail", ""),
                             r"^asha: at rung epoch=(1|3|9) its loss \S+ ranks \d+ of \d+",
                             "trial %d's decision in the events" % t)
            rung = int(ends[0]["detail"].split("epoch=")[1].split()[0])
            # Its last report is its result, taken at the rung where it stopped.
            self.assertGreaterEqual(m.get("epoch"), rung, "trial %d: %s" % (t, h))
            self.assertLess(m.get("epoch"), 27, "trial %d: %s" % (t, h))
            self.assertAlmostEqual(m.get("loss"), finals[params_of(h)["q"]] + 1.5 / m["epoch"], 12)
            self.assertAlmostEqual(fnum(h.get("value")), m["loss"], 12)
            # Its process ended soon after: it did not run on to max.
            self.assertLess(ran.get(t, 0), 27, "trial %d's process was stopped" % t)
        # Every trial was recorded at the first rung; the rungs are indexed.
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:rung:1" % j), 27)
        self.assertEqual(c.redis.cmd("ZRANGE", "cgq:job:{%d}:rungs" % j, 0, -1), ["1", "3", "9"])
        self.assertEqual(c.redis.cmd("SCARD", "cgq:job:{%d}:active" % j), 0)

    def test_asha_rungs_survive_a_coordinator_kill(self):
        # One trial at a time: trial 0 (the best) runs to the end and is
        # recorded at rungs 1, 3 and 9; the coordinator is killed after rung 9.
        # Every later trial is worse and must stop at rung 1 ("ranks 2 of 2"
        # and so on), which only the records from before the kill can say:
        # alone at a rung, a trial goes on.
        c = self.start_default(workers=(("w1", 1),))
        finals = [0.0, 0.5, 0.3, 0.2]
        j = self._submit(c, list(range(4)), 0.1, finals, extra="concurrency: 1")
        c.wait_for(lambda: c.redis.cmd("ZCARD", "cgq:job:{%d}:rung:9" % j) == 1, 60,
                   "trial 0 to reach rung 9")
        c.coordinator.kill9()
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
                                   "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))
        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual((job.get("succeeded"), job.get("stopped")), ("1", "3"), job)
        trials = c.trials(j)
        self.assertEqual(trials[0].get("state"), "succeeded", trials[0])
        self.assertEqual(trials[0].get("attempt"), "1", "adopted, not re-run: %s" % trials[0])
        ev = c.events(j)
        for t in (1, 2, 3):
            self.assertEqual(trials[t].get("state"), "stopped", trials[t])
            self.assertEqual(metrics_of(trials[t]).get("epoch"), 1, trials[t])
            d = [e["detail"] for e in ev if e.get("type") == "trial.early_stopped"
                 and e.get("trial") == str(t)]
            self.assertEqual(len(d), 1, d)
            self.assertIn("rung epoch=1", d[0])
            self.assertIn("ranks 2 of %d" % (t + 1), d[0])
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:rung:1" % j), 4)
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:rung:9" % j), 1)


MEDIAN_SPEC = '''name: median-itest
space:
  q: {grid: [0, 1, 2, 3, 4, 5, 6, 7]}
search: {algorithm: grid, concurrency: 1}
objective: {metric: loss, mode: min}
early_stop: {algorithm: median, attribute: epoch, grace: 3, max: 10}
trial:
  command: python3 {spec_dir}/curve.py 0.04 10 {spec_dir}/epochs.txt
  resources: {cpu: 1}
'''


def median_expected(finals, grace, last, min_others=3):
    """The median stopping rule, for trials run one after another: trial k
    stops at the first epoch e >= grace where its best loss so far is worse
    than the median of the earlier trials' running averages at e (when at
    least min_others reported at e). Returns {k: epoch it stopped at}."""
    running = []  # per earlier trial: {epoch: running average}
    stops = {}
    for k, f in enumerate(finals):
        total, best, mine = 0.0, None, {}
        for e in range(1, last + 1):
            v = f + 1.5 / e
            total += v
            best = v if best is None else min(best, v)
            if e >= grace:
                others = [r[e] for r in running if e in r]
                if len(others) >= min_others and best > statistics.median(others):
                    stops[k] = e
                mine[e] = total / e
            if k in stops:
                break
        running.append(mine)
    return stops


class MedianTest(CgqTestCase):
    def test_median_rule(self):
        c = self.start_default(workers=(("w1", 1),))
        finals = [0.4, 0.1, 0.7, 0.2, 1.2, 0.05, 0.9, 0.3]
        c.write_file("curve.py", CURVE.replace("FINALS", repr(finals)))
        j = c.submit(c.write_file("median.yaml", MEDIAN_SPEC))
        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        want = median_expected(finals, 3, 10)
        self.assertTrue(want and len(want) < len(finals), "a test that can tell: %s" % want)
        trials = c.trials(j)
        ev = c.events(j)
        got = {}
        for t, h in trials.items():
            if h.get("state") == "stopped":
                got[t] = metrics_of(h).get("epoch")
                d = [e["detail"] for e in ev if e.get("type") == "trial.early_stopped"
                     and e.get("trial") == str(t)]
                self.assertEqual(len(d), 1, d)
                self.assertRegex(d[0], r"^median: at epoch=%d its best loss \S+ is worse than "
                                       r"\S+, the median of \d+ other trials' running averages"
                                 % got[t])
            else:
                self.assertEqual(h.get("state"), "succeeded", h)
        self.assertEqual(got, want, "stopped trials and the epoch each stopped at")
        self.assertEqual(int(job.get("stopped")), len(want), job)
        self.assertEqual(int(job.get("succeeded")) + int(job.get("stopped")), 8, job)
        self.assertEqual(job.get("best_trial"), "5", job)


if __name__ == "__main__":
    main()
