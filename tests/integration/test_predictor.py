#!/usr/bin/env python3
"""The built-in trial kind `predictor` end to end: `cgq run` of a small tuning
job of the GNN latency predictor on the first graphs of the committed CG
dataset (orchestration/examples/predictor/data/cpu-local). Every trial runs
`cgq-predictor trial` under the worker (confined, logged, reporting on fd 3):
one report per epoch, a final result with the best epoch's validation and
test metrics, and the best model written to its trial directory. A trial
whose hyper-parameter is unknown fails with a message that names it. The
kernel-level model (model: kernel) on node times, from cgq-cg gen --node-times
and from a cpu-local measurement job with per_op: true through the export. The
GNN's additive readout, node-cost inputs and node-time loss as trial params."""

import glob
import gzip
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, SANITIZER_MARKS, SPEED, SUBREAPER, CgqTestCase, binary,  # noqa: E402
                     main, my_children, proc_cmdline)

DATA = os.path.join(REPO, "orchestration", "examples", "predictor", "data", "cpu-local")
EPOCHS = 12

SPEC = """\
name: predictor-itest
space:
  lr:          {loguniform: [3.0e-3, 1.0e-2]}
  hidden:      {choice: [8, 16]}
  aggregation: {grid: [mean, gcn]}
  epochs: %d
  max_graphs: 200
  batch_size: 16
search: {algorithm: random, samples: 2, concurrency: 2, seed: 3}
objective: {metric: val_srcc, mode: max}
trial:
  kind: predictor
  data: "{spec_dir}/data"
  resources: {cpu: 1}
  timeout: 2m
""" % EPOCHS

BAD = """\
name: predictor-bad
space:
  hiden: 8
trial:
  kind: predictor
  data: "{spec_dir}/data"
"""


class PredictorTest(CgqTestCase):
    def cgq_run(self, work, spec, name):
        env = dict(os.environ)
        for k in ("CGQ_REDIS", "CGQ_COORDINATOR", "CGQ_BIND", "CGQ_CONTROL"):
            env.pop(k, None)
        argv = [binary("cgq"), "run", spec, "--format", "json"]
        t0 = time.monotonic()
        p = subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=150 * SPEED)
        elapsed = time.monotonic() - t0
        out = p.stdout.decode("utf-8", "replace")
        err = p.stderr.decode("utf-8", "replace")
        with open(os.path.join(self.cluster.logdir, "cgq-run-%s.log" % name), "w") as f:
            f.write("[exit %d, %.1fs]\n--- stdout\n%s\n--- stderr\n%s\n" % (
                p.returncode, elapsed, out, err))
        for mark in SANITIZER_MARKS:
            self.assertNotIn(mark, err)
        if SUBREAPER:
            deadline = time.monotonic() + 5
            left = my_children()
            while left and time.monotonic() < deadline:
                time.sleep(0.1)
                left = my_children()
            self.assertEqual(left, [], "left running: %s" % [proc_cmdline(x)[:150] for x in left])
        return p.returncode, out, err

    def test_generated_dataset_holds_families_out(self):
        # Issue 23: cgq-cg gen --count wrote no graph-family.csv.gz, so a
        # generated dataset could not hold a family out (test_family).
        d = os.path.join(self.cluster.tmp, "gen")
        p = subprocess.run([binary("cgq-cg"), "gen", "--count", "20", "--family", "mixed",
                            "--label", "flops", "--out", d], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        with gzip.open(os.path.join(d, "graph-family.csv.gz"), "rt") as f:
            fams = f.read().split()
        self.assertEqual(len(fams), 20)
        self.assertEqual(fams[:5], ["mobilenetv2", "resnet", "vgg", "shufflenetv2", "shufflenet"])
        for i in range(20):  # the family file agrees with the models written beside it
            with open(os.path.join(d, "models", "%06d.json" % i)) as f:
                self.assertTrue(json.load(f)["name"].startswith(fams[i] + "-"), i)
        p = subprocess.run([binary("cgq-predictor"), "train", "--data", d,
                            "--set", "test_family=vgg", "--set", "epochs=2", "--set", "hidden=8",
                            "--set", "layers=1"], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("(train 14, val 2, test 4 graphs;", p.stdout.decode())  # the 4 vgg
        # cgq-predictor features: the same split, every node counted once,
        # the costs node.c gives (FLOPs of the graph as cgq-cg labelled it).
        p = subprocess.run([binary("cgq-predictor"), "features", "--data", d,
                            "--set", "test_family=vgg"], capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = [json.loads(line) for line in p.stdout.decode().splitlines()]
        self.assertEqual(len(rows), 20)
        parts = [r["part"] for r in rows]
        self.assertEqual((parts.count("train"), parts.count("val"), parts.count("test")),
                         (14, 2, 4))
        self.assertEqual({r["family"] for r in rows if r["part"] == "test"}, {"vgg"})
        with gzip.open(os.path.join(d, "graph-label.csv.gz"), "rt") as f:
            flops = [float(line.split(",")[0]) for line in f]
        for r, fl in zip(rows, flops):
            self.assertEqual(sum(c for c, _, _ in r["ops"].values()), r["nodes"])
            self.assertAlmostEqual(sum(f for _, f, _ in r["ops"].values()), r["flops"], delta=1)
            self.assertEqual(r["label"], fl)
        p = subprocess.run([binary("cgq-predictor"), "features", "--data", d, "--set", "sed=1"],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("sed", p.stderr.decode())

    def test_leaderboard_names_the_model(self):
        # Issue 23: cgq run's own leaderboard shows a predictor's test scores
        # and where the best model is, as the README promises.
        work = os.path.join(self.tmp, "board")
        os.makedirs(work)
        shutil.copytree(DATA, os.path.join(work, "data"))
        spec = os.path.join(work, "tune.yaml")
        with open(spec, "w") as f:
            f.write("""name: board
space: {lr: {loguniform: [3.0e-3, 1.0e-2]}, epochs: 2, max_graphs: 60, hidden: 8}
search: {algorithm: random, samples: 2, seed: 3}
objective: {metric: val_srcc, mode: max}
trial: {kind: predictor, data: "{spec_dir}/data", resources: {cpu: 1}}
""")
        env = dict(os.environ)
        for k in ("CGQ_REDIS", "CGQ_COORDINATOR"):
            env.pop(k, None)
        p = subprocess.run([binary("cgq"), "run", spec], cwd=work, env=env, capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=150 * SPEED)
        out = p.stdout.decode()
        self.assertEqual(p.returncode, 0, p.stderr.decode()[-2000:])
        lines = out.splitlines()
        self.assertEqual(lines[0].split()[:6], ["rank", "trial", "val_srcc", "test_srcc",
                                                "test_acc10", "test_mape"])
        best = [l for l in lines if l.startswith("best model: ")]
        self.assertEqual(len(best), 1, out)
        path = best[0].split()[2]
        self.assertTrue(path.endswith("/model.json") and os.path.isfile(path), best)
        self.assertIn("/trial-%s/" % lines[1].split()[1], path, "the best trial's")

    def test_predictor_kind(self):
        work = os.path.join(self.tmp, "work")
        os.makedirs(work)
        shutil.copytree(DATA, os.path.join(work, "data"))
        spec = os.path.join(work, "tune.yaml")
        with open(spec, "w") as f:
            f.write(SPEC)
        rc, out, err = self.cgq_run(work, spec, "good")
        self.assertEqual(rc, 0, "cgq run; stderr tail:\n%s" % err[-3000:])
        doc = json.loads(out)
        self.assertEqual(doc.get("state"), "finished", out[:1000])
        trials = doc["trials"]
        self.assertEqual(len(trials), 4, "2 samples x 2 aggregations")
        for t in trials:
            self.assertEqual(t["state"], "succeeded", "trial %s: %s" % (t["id"], t))
            m = t["metrics"]
            for key in ("val_mae", "val_mape", "val_rmse", "val_srcc", "val_acc10", "test_mae",
                        "test_mape", "test_rmse", "test_srcc", "test_acc10", "best_epoch"):
                self.assertIn(key, m, "trial %s: %s" % (t["id"], m))
            self.assertEqual(m["epoch"], EPOCHS)
            self.assertTrue(1 <= m["best_epoch"] <= EPOCHS, m)
            self.assertTrue(-1 <= m["val_srcc"] <= 1 and 0 <= m["val_acc10"] <= 100, m)
            # 200 graphs: 160 train, 20 validation, 20 test.
            self.assertEqual(m["graphs_train"], 160, m)
        # 12 epochs on 160 graphs order latencies well (they span 100x).
        best = max(t["metrics"]["val_srcc"] for t in trials)
        self.assertGreater(best, 0.5, "best val_srcc")
        # Each trial directory holds the epoch reports' model: model.json + model.f32.
        models = glob.glob(os.path.join(work, ".cgq", "**", "model.json"), recursive=True)
        self.assertEqual(len(models), 4, "model.json per trial under .cgq/: %s" % models)
        for path in models:
            with open(path) as f:
                m = json.load(f)
            self.assertEqual(m["format"], "cgq-predictor-model")
            self.assertIn(m["config"]["aggregation"], ("mean", "gcn"))
            weights = os.path.join(os.path.dirname(path), "model.f32")
            self.assertEqual(os.path.getsize(weights), 4 * m["params"])

        # The best trial's saved model predicts every graph of the dataset
        # (cgq-predictor predict): one positive latency per graph, ranked
        # like the measured ones beyond the 200 graphs it saw.
        best_t = max(trials, key=lambda t: t["metrics"]["val_srcc"])
        best_dir = [os.path.dirname(p) for p in models
                    if "/trial-%d/" % best_t["id"] in p][0]
        p = subprocess.run([binary("cgq-predictor"), "predict", "--model", best_dir, "--data",
                            os.path.join(work, "data"), "--format", "json"],
                           capture_output=True, timeout=60 * SPEED)
        self.assertEqual(p.returncode, 0, p.stderr.decode()[-2000:])
        pred = json.loads(p.stdout)
        with gzip.open(os.path.join(DATA, "num-node-list.csv.gz"), "rt") as f:
            count = sum(1 for line in f if line.strip())
        self.assertEqual(len(pred["graphs"]), count)
        self.assertTrue(all(g["predicted_ms"] > 0 and "measured_ms" in g for g in pred["graphs"]))
        self.assertEqual(pred["metrics"]["n"], count)
        self.assertGreater(pred["metrics"]["srcc"], 0.5, pred["metrics"])
        # A model file that is not one is refused with exit status 2.
        p = subprocess.run([binary("cgq-predictor"), "predict", "--model", spec, "--data",
                            os.path.join(work, "data")], capture_output=True, timeout=60 * SPEED)
        self.assertEqual(p.returncode, 2)
        self.assertIn("tune.yaml", p.stderr.decode())

        # A typo in a hyper-parameter fails the trial and says what is known.
        bad = os.path.join(work, "bad.yaml")
        with open(bad, "w") as f:
            f.write(BAD)
        rc, out, err = self.cgq_run(work, bad, "bad")
        self.assertNotEqual(rc, 0, "a failed job: exit != 0\n" + out[-2000:])
        self.assertIn("unknown hyper-parameter 'hiden'", out + err)

    def test_kernel_model(self):
        # Issue 29: model: kernel as a kind: predictor trial, on a dataset
        # with node times (cgq-cg gen --node-times; the times are this busy
        # machine's noise, so only the plumbing is checked, not accuracy).
        # ResNets only: every op type of the val and test graphs is then in
        # the train graphs too (a mixed set this small may hold an op, such
        # as hswish, in one split only, which fails the trial by design).
        work = os.path.join(self.tmp, "kernel")
        d = os.path.join(work, "data")
        p = subprocess.run([binary("cgq-cg"), "gen", "--count", "25", "--family", "resnet",
                            "--max-res", "64", "--label", "latency,flops", "--repeats", "2",
                            "--warmup", "0", "--node-times", "--no-models", "--out", d],
                           capture_output=True, timeout=120 * SPEED)
        self.assertEqual(p.returncode, 0, p.stderr)
        with gzip.open(os.path.join(d, "num-node-list.csv.gz"), "rt") as f:
            nodes = sum(int(x) for x in f.read().split())
        with gzip.open(os.path.join(d, "node-label.csv.gz"), "rt") as f:
            times = [float(x) for x in f.read().split()]
        self.assertEqual(len(times), nodes)
        self.assertEqual(times[0], 0.0)  # graph 0's input node: nothing runs
        self.assertTrue(all(t >= 0 for t in times) and sum(times) > 0)
        spec = os.path.join(work, "tune.yaml")
        with open(spec, "w") as f:
            f.write("""name: kernel
space: {model: kernel, n_estimators: {grid: [3, 6]}, max_features: 0.5, test_frac: 0.2}
search: {algorithm: random, samples: 1, seed: 3}
objective: {metric: val_acc10, mode: max}
trial: {kind: predictor, data: "{spec_dir}/data", resources: {cpu: 1}, timeout: 2m}
""")
        rc, out, err = self.cgq_run(work, spec, "kernel")
        self.assertEqual(rc, 0, "cgq run; stderr tail:\n%s" % err[-3000:])
        trials = json.loads(out)["trials"]
        self.assertEqual(len(trials), 2)
        for t in trials:
            self.assertEqual(t["state"], "succeeded", t)
            m = t["metrics"]
            self.assertEqual(m["epoch"], 1)
            for key in ("val_mape", "val_srcc", "val_acc10", "test_mape", "test_srcc",
                        "test_acc10"):
                self.assertIn(key, m)
        models = glob.glob(os.path.join(work, ".cgq", "**", "model.json"), recursive=True)
        self.assertEqual(len(models), 2)
        with open(models[0]) as f:
            m = json.load(f)
        self.assertEqual(m["config"]["model"], "kernel")
        self.assertIn("conv2d", m["kernel"]["ops"])
        p = subprocess.run([binary("cgq-predictor"), "predict", "--model", models[0], "--data", d,
                            "--format", "json"], capture_output=True, timeout=60 * SPEED)
        self.assertEqual(p.returncode, 0, p.stderr.decode()[-2000:])
        pred = json.loads(p.stdout)
        self.assertEqual(len(pred["graphs"]), 25)
        self.assertTrue(all(g["predicted_ms"] > 0 for g in pred["graphs"]))

        # Trained on ResNets only, the model has never seen a depthwise conv
        # or a channel shuffle: predicting a ShuffleNetV2 says so (exit 2).
        shuffle = os.path.join(work, "shufflenetv2.json")
        p = subprocess.run([binary("cgq-cg"), "gen", "--family", "shufflenetv2", "--out", shuffle],
                           capture_output=True, timeout=60 * SPEED)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = subprocess.run([binary("cgq-predictor"), "predict", "--model", models[0], "--data",
                            shuffle], capture_output=True, timeout=60 * SPEED)
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertRegex(p.stderr.decode(),
                         r"graph 0 node [0-9]+ is op '(slice|shuffle|concat|dwconv2d)'.*never saw")
        self.assertEqual(p.stdout, b"")
        # Node times are for a dataset with a latency label.
        for argv, says in ((["--node-times"], "for datasets"),
                           (["--count", "2", "--label", "flops", "--node-times", "--out",
                             os.path.join(work, "x")], "needs latency")):
            p = subprocess.run([binary("cgq-cg"), "gen"] + argv, capture_output=True,
                               timeout=60 * SPEED)
            self.assertEqual(p.returncode, 2, argv)
            self.assertIn(says, p.stderr.decode())
        # A dataset without node times: model kernel says what to do.
        g = os.path.join(work, "plain")
        p = subprocess.run([binary("cgq-cg"), "gen", "--count", "5", "--label", "flops",
                            "--no-models", "--out", g], capture_output=True, timeout=60 * SPEED)
        self.assertEqual(p.returncode, 0, p.stderr)
        p = subprocess.run([binary("cgq-predictor"), "train", "--data", g, "--set", "model=kernel"],
                           capture_output=True, timeout=60 * SPEED)
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn("no node-label.csv.gz", p.stderr.decode())
    def test_additive_gnn(self):
        # Issue 29's better GNN as a kind: predictor trial: readout: additive,
        # node_costs on and off, node_loss on the node times of cgq-cg gen
        # --node-times (this busy machine's noise: only the plumbing is
        # checked, not accuracy); the saved model records its input width and
        # cgq-predictor predict applies it.
        work = os.path.join(self.tmp, "additive")
        d = os.path.join(work, "data")
        p = subprocess.run([binary("cgq-cg"), "gen", "--count", "20", "--family", "mixed",
                            "--max-res", "64", "--label", "latency", "--repeats", "2",
                            "--warmup", "0", "--node-times", "--no-models", "--out", d],
                           capture_output=True, timeout=120 * SPEED)
        self.assertEqual(p.returncode, 0, p.stderr)
        spec = os.path.join(work, "tune.yaml")
        with open(spec, "w") as f:
            f.write("""name: additive
space: {readout: additive, node_costs: {grid: [true, false]}, node_loss: 0.5, epochs: 3,
        hidden: 8, layers: 2, batch_size: 4, val_frac: 0.2, test_frac: 0.2}
search: {algorithm: random, samples: 1, seed: 3}
objective: {metric: val_mape, mode: min}
trial: {kind: predictor, data: "{spec_dir}/data", resources: {cpu: 1}, timeout: 2m}
""")
        rc, out, err = self.cgq_run(work, spec, "additive")
        self.assertEqual(rc, 0, "cgq run; stderr tail:\n%s" % err[-3000:])
        trials = json.loads(out)["trials"]
        self.assertEqual(len(trials), 2)
        for t in trials:
            self.assertEqual(t["state"], "succeeded", t)
            self.assertEqual(t["metrics"]["epoch"], 3)
            self.assertIn("test_acc10", t["metrics"])
        models = sorted(glob.glob(os.path.join(work, ".cgq", "**", "model.json"),
                                  recursive=True))
        self.assertEqual(len(models), 2)
        dims = set()
        for path in models:
            with open(path) as f:
                m = json.load(f)
            self.assertEqual(m["version"], 2)
            self.assertEqual(m["config"]["readout"], "additive")
            self.assertEqual(m["config"]["node_loss"], 0.5)
            want = 34 if m["config"]["node_costs"] else 32
            self.assertEqual(m["in_dim"], want)
            self.assertEqual(len(m["scaling"]["feat_mean"]), want - 16)
            dims.add(want)
            p = subprocess.run([binary("cgq-predictor"), "predict", "--model", path, "--data", d,
                                "--format", "json"], capture_output=True, timeout=60 * SPEED)
            self.assertEqual(p.returncode, 0, p.stderr.decode()[-2000:])
            pred = json.loads(p.stdout)
            self.assertEqual(len(pred["graphs"]), 20)
            self.assertTrue(all(g["predicted_ms"] > 0 for g in pred["graphs"]))
            with gzip.open(os.path.join(d, "num-node-list.csv.gz"), "rt") as f:
                sizes = [int(x) for x in f.read().split()]
            for g, n in zip(pred["graphs"], sizes):  # what the additive readout summed
                self.assertEqual(len(g["node_ms"]), n)
                self.assertTrue(all(v > 0 for v in g["node_ms"]))
                self.assertAlmostEqual(sum(g["node_ms"]), g["predicted_ms"],
                                       delta=1e-6 * g["predicted_ms"])
        self.assertEqual(dims, {32, 34})

        # node_loss on a dataset without node times fails the trial and says
        # what is missing; readout: sum with node_loss says what it needs.
        g = os.path.join(work, "plain")
        p = subprocess.run([binary("cgq-cg"), "gen", "--count", "6", "--label", "flops",
                            "--no-models", "--out", g], capture_output=True, timeout=60 * SPEED)
        self.assertEqual(p.returncode, 0, p.stderr)
        for sets, says in ((["readout=additive", "node_loss=1"], "no node-label.csv.gz"),
                           (["readout=sum", "node_loss=1"], "needs readout: additive"),
                           (["readout=additve"], "expected sum, mean or additive")):
            argv = [binary("cgq-predictor"), "train", "--data", g]
            for kv in sets:
                argv += ["--set", kv]
            p = subprocess.run(argv, capture_output=True, timeout=60 * SPEED)
            self.assertEqual(p.returncode, 2, (sets, p.stdout))
            self.assertIn(says, p.stderr.decode())

    def test_per_op_measurement_exports_node_times(self):
        # Issue 28's per-op profiles through cgq's own measurement job: cpu-local
        # with per_op: true on the local device runner (started by cgq run),
        # then cgq-predictor export writes node-label.csv.gz, one time per node
        # in node order, which model: kernel trains on.
        work = os.path.join(self.tmp, "perop")
        os.makedirs(work)
        spec = os.path.join(work, "measure.yaml")
        with open(spec, "w") as f:
            f.write("""name: perop
space:
  family: {grid: [resnet, vgg]}
  per_op: true
  resolution: 32
  seed:   {randint: [0, 999999]}
search: {algorithm: random, samples: 3, seed: 0}
objective: {metric: time, mode: min}
trial: {on: {device: cpu}, benchmark: cpu-local, repeats: 3, warmup: 1}
""")
        rc, out, err = self.cgq_run(work, spec, "perop")
        self.assertEqual(rc, 0, "cgq run; stderr tail:\n%s" % err[-3000:])
        doc = json.loads(out)
        trials = doc["trials"]
        self.assertEqual(len(trials), 6)
        for t in trials:
            self.assertEqual(t["state"], "succeeded", t)
            nm = t["metrics"]["node_ms"]
            self.assertEqual(nm[0], 0)
            self.assertTrue(all(v >= 0 for v in nm) and sum(nm) > 0, nm)
        results = os.path.join(work, "results.json")
        with open(results, "w") as f:
            f.write(out)
        d = os.path.join(work, "data")
        p = subprocess.run([binary("cgq-predictor"), "export", "--results", results, "--out", d],
                           capture_output=True, timeout=60 * SPEED)
        self.assertEqual(p.returncode, 0, p.stderr)
        with gzip.open(os.path.join(d, "node-label.csv.gz"), "rt") as f:
            times = [float(x) for x in f.read().split()]
        want = []
        for t in sorted(trials, key=lambda t: t["id"]):
            want += t["metrics"]["node_ms"]
        self.assertEqual(len(times), len(want))
        for a, b in zip(times, want):
            self.assertAlmostEqual(a, b, delta=1e-6)  # written to the nanosecond
        p = subprocess.run([binary("cgq-predictor"), "train", "--data", d, "--set", "model=kernel",
                            "--set", "n_estimators=3", "--set", "val_frac=0.2",
                            "--set", "test_frac=0.2"], capture_output=True, timeout=60 * SPEED)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("kernel model (train 4, val 1, test 1 graphs;", p.stdout.decode())


if __name__ == "__main__":
    main()
