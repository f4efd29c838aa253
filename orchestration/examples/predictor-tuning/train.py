#!/usr/bin/env python3
"""Train a small latency predictor on graphs of some CNN families and test it
on a family it has never seen (the CG / GENNAPE setting), with the Python
standard library only.

The data is data/cg_tiny.csv (make_data.py): one row per computational graph,
a few graph aggregates as features, the latency in ms as the label. The model
is a one-hidden-layer MLP (ReLU) on standardised features predicting
log(latency), trained with minibatch SGD + momentum and L2 weight decay.

  - the graphs of every family except --test-family are split 80/20 (by
    --seed) into train and validation;
  - each epoch reports train_mse, val_mse (log space), val_mape (%) and
    val_srcc (Spearman rank correlation: does the predictor order graphs
    right, which is what a NAS search needs);
  - at the end the weights of the best epoch (by val_srcc) are tested on the
    held-out family: test_srcc, test_mape go into result.json with the best
    epoch's val metrics.

Under cgq the params come from CGQ_PARAMS (see tune.yaml); by hand:

    python3 train.py lr=0.03 hidden=16 l2=1e-4 test_family=nb201 seed=1
"""

import csv
import math
import os
import random
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# orchestration/examples/predictor-tuning -> repository root -> clients/python
sys.path.insert(0, os.path.join(_HERE, "..", "..", "..", "clients", "python"))
try:
    import cgq  # noqa: E402
except ImportError:
    sys.exit("train.py: cannot import cgq: copy clients/python/cgq/trial.py next to this script as cgq.py")

FEATURES = ["n_nodes", "n_conv", "n_dwconv", "mean_kernel", "log_channels", "log_mflops",
            "log_kparams", "max_stride"]
DEFAULTS = {"lr": 0.03, "hidden": 16, "l2": 1e-4, "epochs": 30, "batch": 16,
            "test_family": "nb201", "seed": 0, "data": os.path.join(_HERE, "data", "cg_tiny.csv")}


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise SystemExit("train.py: %s holds no graphs" % path)
    return [(r["family"], [float(r[k]) for k in FEATURES], math.log(float(r["latency_ms"])))
            for r in rows]


def standardiser(xs):
    n = len(xs)
    cols = list(zip(*xs))
    mean = [sum(c) / n for c in cols]
    std = [math.sqrt(sum((v - m) ** 2 for v in c) / n) or 1.0 for c, m in zip(cols, mean)]
    return lambda x: [(v - m) / s for v, m, s in zip(x, mean, std)]


class MLP:
    def __init__(self, n_in, hidden, rng):
        scale = math.sqrt(2.0 / n_in)
        self.w1 = [[rng.gauss(0.0, scale) for _ in range(n_in)] for _ in range(hidden)]
        self.b1 = [0.0] * hidden
        self.w2 = [rng.gauss(0.0, math.sqrt(1.0 / hidden)) for _ in range(hidden)]
        self.b2 = 0.0
        self.v = None  # momentum buffers

    def forward(self, x):
        h = []
        for w, b in zip(self.w1, self.b1):
            z = b + sum(wi * xi for wi, xi in zip(w, x))
            h.append(z if z > 0.0 else 0.0)
        return h, self.b2 + sum(wi * hi for wi, hi in zip(self.w2, h))

    def predict(self, x):
        return self.forward(x)[1]

    def step(self, batch, lr, l2, momentum=0.9):
        hidden, n_in = len(self.w1), len(self.w1[0])
        g1 = [[0.0] * n_in for _ in range(hidden)]
        gb1 = [0.0] * hidden
        g2 = [0.0] * hidden
        gb2 = 0.0
        loss = 0.0
        for x, y in batch:
            h, out = self.forward(x)
            d = out - y
            loss += d * d
            gb2 += d
            for j in range(hidden):
                g2[j] += d * h[j]
                if h[j] > 0.0:
                    dj = d * self.w2[j]
                    gb1[j] += dj
                    row = g1[j]
                    for i in range(n_in):
                        row[i] += dj * x[i]
        k = 2.0 / len(batch)
        if self.v is None:
            self.v = [[[0.0] * n_in for _ in range(hidden)], [0.0] * hidden, [0.0] * hidden, 0.0]
        v1, vb1, v2, vb2 = self.v
        for j in range(hidden):
            for i in range(n_in):
                v1[j][i] = momentum * v1[j][i] - lr * (k * g1[j][i] + l2 * self.w1[j][i])
                self.w1[j][i] += v1[j][i]
            vb1[j] = momentum * vb1[j] - lr * k * gb1[j]
            self.b1[j] += vb1[j]
            v2[j] = momentum * v2[j] - lr * (k * g2[j] + l2 * self.w2[j])
            self.w2[j] += v2[j]
        vb2 = momentum * vb2 - lr * k * gb2
        self.b2 += vb2
        self.v[3] = vb2
        return loss / len(batch)

    def copy(self):
        m = MLP.__new__(MLP)
        m.w1 = [list(r) for r in self.w1]
        m.b1, m.w2, m.b2, m.v = list(self.b1), list(self.w2), self.b2, None
        return m


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = math.sqrt(sum((x - ma) ** 2 for x in ra))
    vb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (va * vb) if va > 0 and vb > 0 else 0.0


def evaluate(model, data, y_mean, y_std):
    # a diverging model's outputs are clipped so that the metrics stay numbers
    pred = [min(max(model.predict(x), -1e6), 1e6) for x, _ in data]
    true = [y for _, y in data]
    mse = sum((p - t) ** 2 for p, t in zip(pred, true)) / len(data)
    # back to milliseconds for the relative error; a family unlike the
    # training ones can push a prediction far out: clip it to 100x the range
    ms_p = [math.exp(min(max(p, -8.0), 8.0) * y_std + y_mean) for p in pred]
    ms_t = [math.exp(t * y_std + y_mean) for t in true]
    mape = 100.0 * sum(abs(p - t) / t for p, t in zip(ms_p, ms_t)) / len(data)
    return {"mse": mse, "mape": mape, "srcc": spearman(pred, true)}


def main():
    p = dict(DEFAULTS)
    p.update(cgq.params())
    lr, hidden, l2 = float(p["lr"]), int(p["hidden"]), float(p["l2"])
    epochs, batch, seed = int(p["epochs"]), int(p["batch"]), int(p["seed"])
    test_family = str(p["test_family"])

    rows = load(p["data"])
    families = sorted({f for f, _, _ in rows})
    if test_family not in families:
        raise SystemExit("train.py: test_family %r is not in the data (families: %s)"
                         % (test_family, ", ".join(families)))
    rng = random.Random(seed)
    seen = [r for r in rows if r[0] != test_family]
    held = [r for r in rows if r[0] == test_family]
    rng.shuffle(seen)
    n_val = max(1, len(seen) // 5)
    val, train = seen[:n_val], seen[n_val:]

    # standardise features and target with the training split's statistics only
    scale_x = standardiser([x for _, x, _ in train])
    ys = [y for _, _, y in train]
    y_mean = sum(ys) / len(ys)
    y_std = math.sqrt(sum((y - y_mean) ** 2 for y in ys) / len(ys)) or 1.0

    def prep(part):
        return [(scale_x(x), (y - y_mean) / y_std) for _, x, y in part]

    train_d, val_d, test_d = prep(train), prep(val), prep(held)
    print("train %d graphs (%s), val %d, test %d (%s); lr=%g hidden=%d l2=%g seed=%d"
          % (len(train_d), ", ".join(f for f in families if f != test_family), len(val_d),
             len(test_d), test_family, lr, hidden, l2, seed), flush=True)

    model = MLP(len(FEATURES), hidden, rng)
    best, best_model = None, model.copy()
    for epoch in range(1, epochs + 1):
        rng.shuffle(train_d)
        losses = [model.step(train_d[i:i + batch], lr, l2) for i in range(0, len(train_d), batch)]
        train_mse = sum(losses) / len(losses)
        if not math.isfinite(train_mse) or train_mse > 1e6:
            cgq.report(epoch=epoch, train_mse=None, diverged=True)  # null in JSON
            print("diverged at epoch %d (lr %g too large?)" % (epoch, lr), file=sys.stderr)
            break
        v = evaluate(model, val_d, y_mean, y_std)
        cgq.report(epoch=epoch, train_mse=round(train_mse, 6), val_mse=round(v["mse"], 6),
                   val_mape=round(v["mape"], 4), val_srcc=round(v["srcc"], 6))
        if best is None or v["srcc"] > best["val_srcc"]:
            best = {"epoch": epoch, "val_srcc": v["srcc"], "val_mape": v["mape"],
                    "val_mse": v["mse"]}
            best_model = model.copy()

    if best is None:  # diverged in the first epoch: still a result, and a poor one
        best = {"epoch": 0, "val_srcc": -1.0, "val_mape": None, "val_mse": None}
    t = evaluate(best_model, test_d, y_mean, y_std)
    metrics = {"best_epoch": best["epoch"], "val_srcc": round(best["val_srcc"], 6),
               "val_mape": best["val_mape"] and round(best["val_mape"], 4),
               "val_mse": best["val_mse"] and round(best["val_mse"], 6),
               "test_family": test_family, "test_srcc": round(t["srcc"], 6),
               "test_mape": round(t["mape"], 4), "seed": seed}
    cgq.result(metrics)
    print("best epoch %d: val_srcc %.4f; on %s: test_srcc %.4f, test_mape %.1f%%"
          % (best["epoch"], best["val_srcc"], test_family, t["srcc"], t["mape"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
