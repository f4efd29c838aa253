#!/usr/bin/env python3
"""Hyperband (early_stop: {algorithm: hyperband}; docs/architecture.md,
"Hyperband") on a synthetic learning curve: the loss of x after epoch e is
(x - 0.7)^2 + 0.5 / e, so the best x is 0.7 at every epoch. One bracket of
max_t 9, reduction_factor 3: 9 trials run 1 epoch, the best 3 are resumed
from their checkpoints to epoch 3, the best of those to epoch 9. Checked:

- it finds x = 0.7, with far fewer epochs run (counted by the trials
  themselves) than the 81 of running all 9 trials to max_t;
- every promoted trial resumes from the checkpoint it paused at
  (CGQ_RESUME_STEP), never from epoch 1 again;
- the others end stopped, with the one-line reason;
- the coordinator killed with -9 mid-bracket (trials paused, waiting for
  their cohort) and restarted: the bracket completes all the same;
- two brackets at once (brackets: 2: 9 trials at budgets 1/3/9 and 5 at
  3/9, running side by side on 4 cpus) across a coordinator kill -9: each
  bracket promotes within itself and ends with one trial at max_t, and
  `cgq results` (table and csv) shows each trial's bracket and rung.
"""
import csv
import io

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, CgqTestCase, endpoint_port, main  # noqa: E402

CLIENTS = os.path.join(REPO, "clients", "python")

TRIAL = r'''
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import cgq

x, sleep_s = float(sys.argv[2]), float(sys.argv[3])
trial, attempt = os.environ["CGQ_TRIAL_ID"], int(os.environ["CGQ_ATTEMPT"])
out = os.environ["CGQ_SPEC_DIR"]
start = cgq.resume_step() or 0
with open(os.path.join(out, "runs-%s.jsonl" % trial), "a") as f:
    f.write(json.dumps({"attempt": attempt, "resume": os.environ.get("CGQ_RESUME_STEP")}) + "\n")
for epoch in range(start + 1, 10):
    time.sleep(sleep_s)
    with open(os.path.join(out, "epochs-%s.log" % trial), "a") as f:
        f.write("%d\n" % epoch)
    cgq.report(epoch=epoch, loss=(x - 0.7) ** 2 + 0.02 / epoch)
    with open(os.path.join(cgq.checkpoint_dir(), "state.json"), "w") as f:
        json.dump({"epoch": epoch}, f)
    cgq.checkpoint(epoch=epoch)
cgq.result(loss=(x - 0.7) ** 2 + 0.02 / 9, epochs=9)
'''

SPEC = '''name: hyperband-itest
space:
  x: {grid: [-1.7, -1.4, -1.1, -0.8, -0.5, -0.2, 0.1, 0.4, 0.7]}
search: {algorithm: grid}
objective: {metric: loss, mode: min}
early_stop: {algorithm: hyperband, time_attr: epoch, max_t: 9, reduction_factor: 3, brackets: 1}
trial:
  command: python3 {spec_dir}/hb_trial.py %s {x} 0.15
  resources: {cpu: 1}
  timeout: 2m
checkpoint: {store: '{spec_dir}/store'}
'''


class HyperbandTest(CgqTestCase):
    def runs(self, c, t):
        path = os.path.join(c.specdir, "runs-%s.jsonl" % t)
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def epochs(self, c, t):
        path = os.path.join(c.specdir, "epochs-%s.log" % t)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [int(line) for line in f if line.strip()]

    def test_finds_the_best_with_less_budget_across_a_restart(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        c.start_worker("w1", cpus=3)
        c.write_file("hb_trial.py", TRIAL)
        j = c.submit(c.write_file("hb.yaml", SPEC % CLIENTS))

        # Mid-bracket: some trials paused at budget 1, waiting for the rest.
        c.wait_value(lambda: [h.get("state") for h in c.trials(j).values()],
                     lambda s: s.count("paused") >= 3, 60, "three trials paused at budget 1")
        c.coordinator.kill9()
        c.start_coordinator(extra=("--durable-after", "200ms",
                                   "--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
                                   "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))

        job = c.wait_job(j, 150)
        self.assertEqual(job.get("state"), "finished", job)
        trials = c.trials(j)
        self.assertEqual(len(trials), 9)
        best = json.loads(trials[int(job["best_trial"])]["params"])
        self.assertAlmostEqual(best["x"], 0.7, msg="hyperband found x=%s; events: %s" % (
            best, [(e["type"], e.get("trial"), e.get("detail")) for e in c.events(j)
                   if e["type"] in ("trial.promoted", "trial.early_stopped")]))
        self.assertEqual(job.get("succeeded"), "1", job)
        self.assertEqual(job.get("stopped"), "8", job)
        self.assertEqual(job.get("failed"), "0", job)

        total = sum(len(self.epochs(c, t)) for t in trials)
        # 9 x 1 + 3 x 2 + 1 x 6 = 21 epochs (a few more if a Stop crossed the
        # start of an epoch); all nine to max_t would be 81.
        self.assertLess(total, 40, "epochs run: %d" % total)
        self.assertGreaterEqual(total, 21)

        promoted = [e for e in c.events(j) if e["type"] == "trial.promoted"]
        self.assertEqual(len(promoted), 4, promoted)  # 3 to budget 3, 1 to 9
        for t, h in trials.items():
            runs = self.runs(c, t)
            self.assertIsNone(runs[0]["resume"], runs)
            for prev, run in zip(runs, runs[1:]):
                # Each promotion resumes where it paused: never epoch 1 again.
                self.assertIsNotNone(run["resume"], runs)
                self.assertGreaterEqual(int(run["resume"]), 1, runs)
            ep = self.epochs(c, t)
            self.assertEqual(ep.count(1), 1, "trial %s ran epoch 1 again: %s" % (t, ep))
            if h["state"] == "stopped":
                why = [e.get("detail") for e in c.events(j)
                       if e.get("trial") == str(t) and e["type"] == "trial.early_stopped"]
                self.assertEqual(len(why), 1, why)
                self.assertRegex(why[0], r"^hyperband bracket 0 rung [01] \(budget [13]\): value "
                                 r"\S+ is #\d of \d, not in the top \d \(cut-off \S+\)$")
        # The best ran to max_t in at most three attempts (a trial promoted
        # before its checkpoint came goes on without a pause), each resumed
        # from a checkpoint.
        best_runs = self.runs(c, int(job["best_trial"]))
        self.assertLessEqual(len(best_runs), 3, best_runs)
        self.assertEqual(self.epochs(c, int(job["best_trial"]))[-1], 9)
        self.assertEqual(sorted(set(self.epochs(c, int(job["best_trial"])))), list(range(1, 10)))

    def test_two_brackets_at_once_across_a_restart(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        c.start_worker("w1", cpus=4)
        c.write_file("hb_trial.py", TRIAL)
        xs = [-1.7, -1.4, -1.1, -0.8, -0.5, -0.2, 0.1, 0.4, 0.7, -1.0, -0.4, 0.2, 0.6, 1.0]
        spec = (SPEC % CLIENTS).replace(
            "x: {grid: [-1.7, -1.4, -1.1, -0.8, -0.5, -0.2, 0.1, 0.4, 0.7]}",
            "x: {grid: [%s]}" % ", ".join(str(x) for x in xs)).replace("brackets: 1",
                                                                      "brackets: 2")
        j = c.submit(c.write_file("hb2.yaml", spec))
        # Both brackets under way: a trial of the second (ids 9..13) has run
        # while some of the first wait paused for their cohort.
        c.wait_value(lambda: c.trials(j),
                     lambda ts: (sum(h.get("state") == "paused" for h in ts.values()) >= 2
                                 and any(int(t) >= 9 and h.get("state") != "pending"
                                         for t, h in ts.items())),
                     60, "trials of both brackets under way, some paused")
        c.coordinator.kill9()
        c.start_coordinator(extra=("--durable-after", "200ms",
                                   "--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
                                   "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))
        job = c.wait_job(j, 150)
        self.assertEqual(job.get("state"), "finished", job)
        trials = c.trials(j)
        self.assertEqual(len(trials), 14)
        self.assertEqual(job.get("succeeded"), "2", job)  # one per bracket, at max_t
        self.assertEqual(job.get("stopped"), "12", job)
        for t in trials:
            self.assertEqual(self.epochs(c, t).count(1), 1, "trial %s restarted" % t)
        winners = sorted(int(t) for t, h in trials.items() if h["state"] == "succeeded")
        self.assertTrue(winners[0] < 9 <= winners[1], winners)  # one of each bracket
        for w in winners:
            self.assertEqual(self.epochs(c, w)[-1], 9)
        # Bracket 1 (s = 1) starts at budget 3: its trials' first epochs stop there.
        for t in range(9, 14):
            self.assertGreaterEqual(len(self.epochs(c, t)), 3, (t, self.epochs(c, t)))
        # cgq results: the bracket and rung of each trial.
        r = c.cgq("results", str(j), "--format", "csv")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {int(row["id"]): row for row in csv.DictReader(io.StringIO(r.stdout))}
        self.assertEqual(len(rows), 14, r.stdout)
        for t, row in rows.items():
            self.assertEqual(row["bracket"], "0" if t < 9 else "1", row)
            if t in winners:  # the last rung: 2 of bracket s=2, 1 of s=1
                self.assertEqual(row["rung"], "2" if t < 9 else "1", row)
        rungs0 = sorted(int(rows[t]["rung"]) for t in range(9))
        self.assertEqual(rungs0, [0] * 6 + [1] * 2 + [2], rows)  # 9 -> 3 -> 1
        rungs1 = sorted(int(rows[t]["rung"]) for t in range(9, 14))
        self.assertEqual(rungs1, [0] * 4 + [1], rows)  # 5 -> 1
        r = c.cgq("results", str(j), "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        places = {t["id"]: (t["bracket"], t["rung"]) for t in json.loads(r.stdout)["trials"]}
        self.assertEqual(places, {t: (int(row["bracket"]), int(row["rung"]))
                                  for t, row in rows.items()})
        r = c.cgq("results", str(j))
        self.assertEqual(r.returncode, 0, r.stderr)
        head = r.stdout.splitlines()[0].split()
        self.assertIn("bracket", head, r.stdout)
        self.assertIn("rung", head, r.stdout)

    def test_bohb_two_rounds(self):
        # search: bohb proposes the second round's configurations from the
        # first round's results (at the largest budget enough reached).
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.start_worker("w1", cpus=3)
        c.write_file("hb_trial.py", TRIAL)
        spec = (SPEC % CLIENTS).replace(
            "x: {grid: [-1.7, -1.4, -1.1, -0.8, -0.5, -0.2, 0.1, 0.4, 0.7]}",
            "x: {uniform: [-2, 1]}").replace(
            "search: {algorithm: grid}", "search: {algorithm: bohb, samples: 18, initial: 4}")
        j = c.submit(c.write_file("bohb.yaml", spec))
        job = c.wait_job(j, 150)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "2", job)  # one per bracket
        self.assertEqual(job.get("stopped"), "16", job)
        trials = c.trials(j)
        total = sum(len(self.epochs(c, t)) for t in trials)
        self.assertLess(total, 80, "epochs run: %d (all 18 to max_t: 162)" % total)
        best = json.loads(trials[int(job["best_trial"])]["params"])["x"]
        self.assertLess(abs(best - 0.7), 0.6, "bohb's best x=%s" % best)
        for t in trials:
            self.assertEqual(self.epochs(c, t).count(1), 1, "trial %s restarted" % t)
        # Every rung a trial reached below max_t is an observation of the
        # model, kept in the searcher's state: two rounds of 9 at budget 1
        # and 3 at budget 3.
        rungs = json.loads(job["searcher"]).get("rungs", [])
        self.assertEqual(sorted(b for _, b, _ in rungs), [1.0] * 18 + [3.0] * 6, rungs)


if __name__ == "__main__":
    main()
