#!/usr/bin/env python3
"""bench/predictor_baselines.py: the baselines of docs/predictor.md's table
(issue 29), on the same splits as the kernel-level model and the GNN.

For split seeds 0..--seeds-1 (or with --family, that family held out),
`cgq-predictor features --data DIR --set seed=S` gives every graph's part
of the split (the one `cgq-predictor train --set seed=S` makes), its label,
its total FLOPs and bytes moved, and per op type [count, FLOPs, bytes]
(predictor/node.c, the same count the kernel model and the GNN use). Then:

  linear   a linear fit per family, latency = a*FLOPs + b*bytes + c, by
           least squares on the relative error (weights 1/latency^2, as
           MAPE judges it); a family the train graphs lack (a held-out
           family) gets the fit over all train graphs.
  rf       scikit-learn's RandomForestRegressor (200 trees, seeded) on the
           graph's aggregated op features (nodes, FLOPs, bytes, and per op
           type its count, FLOPs and bytes), regressing log latency.

Prints each split's test acc10 (% within +-10 %), MAPE (%) and SRCC, then
the means, in compare.sh's format. Needs numpy, scipy and scikit-learn
(Debian: python3-sklearn). Deterministic; asserts nothing.

    python3 bench/predictor_baselines.py --data orchestration/examples/predictor/data/cpu-local
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
from scipy.stats import spearmanr
from sklearn.ensemble import RandomForestRegressor


def features(args, seed):
    argv = [os.path.join(args.bin_dir, "cgq-predictor"), "features", "--data", args.data,
            "--set", "seed=%d" % seed]
    if args.family:
        argv += ["--set", "test_family=" + args.family]
    out = subprocess.run(argv, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit("predictor_baselines.py: %s: %s" % (" ".join(argv), out.stderr.strip()))
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def metrics(pred, y):
    rel = np.abs(pred - y) / y
    return (100.0 * float(np.mean(rel <= 0.10)), 100.0 * float(np.mean(rel)),
            float(spearmanr(pred, y).correlation))


def linear(rows):
    train = [r for r in rows if r["part"] == "train"]
    test = [r for r in rows if r["part"] == "test"]

    def fit(rs):
        x = np.array([[r["flops"], r["bytes"], 1.0] for r in rs])
        y = np.array([r["label"] for r in rs])
        w = 1.0 / y  # rows scaled by 1/y: least squares on the relative error
        coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
        return coef

    overall = fit(train)
    fams = {}
    for f in {r["family"] for r in train}:
        rs = [r for r in train if r["family"] == f]
        if len(rs) >= 3:
            fams[f] = fit(rs)
    pred = np.array([np.dot(fams.get(r["family"], overall), [r["flops"], r["bytes"], 1.0])
                     for r in test])
    # A fit can go below zero far outside its data: floor at the smallest label seen.
    floor = min(r["label"] for r in train)
    return np.maximum(pred, floor), np.array([r["label"] for r in test])


def rf(rows, seed):
    ops = sorted({op for r in rows for op in r["ops"]})

    def vec(r):
        v = [r["nodes"], np.log1p(r["flops"]), np.log1p(r["bytes"])]
        for op in ops:
            c, fl, by = r["ops"].get(op, [0, 0.0, 0.0])
            v += [c, np.log1p(fl), np.log1p(by)]
        return v

    train = [r for r in rows if r["part"] == "train"]
    test = [r for r in rows if r["part"] == "test"]
    model = RandomForestRegressor(n_estimators=200, random_state=seed, n_jobs=1)
    model.fit(np.array([vec(r) for r in train]), np.log([r["label"] for r in train]))
    pred = np.exp(model.predict(np.array([vec(r) for r in test])))
    return pred, np.array([r["label"] for r in test])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", default="./build/bin")
    ap.add_argument("--data", required=True, help="a CG dataset directory")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--family", default="", help="hold this family out as the test set")
    args = ap.parse_args()
    runs = {"linear": [], "rf": []}
    print("%-14s %4s %8s %8s %8s" % ("model", "seed", "acc10", "mape", "srcc"))
    for seed in range(args.seeds):
        rows = features(args, seed)
        for name, (pred, y) in (("linear", linear(rows)), ("rf", rf(rows, seed))):
            m = metrics(pred, y)
            runs[name].append(m)
            print("%-14s %4d %8.1f %8.2f %8.4f" % (name, seed, m[0], m[1], m[2]))
    print()
    for name, ms in runs.items():
        a = np.mean(np.array(ms), axis=0)
        print("%-14s mean %8.1f %8.2f %8.4f  (%d splits)" % (name, a[0], a[1], a[2], len(ms)))


if __name__ == "__main__":
    main()
