#!/usr/bin/env python3
"""Does a graph substitution change what a model computes? (seed 003)

Evaluates a small workload before and after a substitution pass, in a given
floating-point type, on a fraction of a synthetic dataset, and compares the
intermediate results at breakpoints (the output of each block) and the
logits. Standard library only: float16 and float32 are emulated by rounding
the result of every multiply and add to that type (struct 'e' / 'f'),
accumulating in the same type.

  --model   mlp | resnet       three dense+BN+ReLU layers / two residual blocks, then a head
  --subst   none | bn_fold | reassoc
            none:    the same graph twice (every difference must be 0)
            bn_fold: BatchNorm folded into the preceding dense layer's weights
                     (folded in float64, then stored in --dtype, as a compiler would)
            reassoc: dot products summed pairwise (a tree) instead of left to right
  --dtype   float16 | float32 | float64
  --ratio   fraction of the 256 samples to run (both graphs see the same ones)

Each breakpoint is one report (breakpoint, name, max_abs_diff, mean_abs_diff,
max_rel_diff = max_abs_diff / max |value before|); result.json holds the
logits' differences, top-1 agreement and the accuracy before and after
(labels: the float64 original's predictions).

    python3 evaluate.py --model resnet --subst bn_fold --dtype float16
"""

import argparse
import math
import os
import random
import struct
import sys
import zlib

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "..", "..", "clients", "python"))
try:
    import cgq  # noqa: E402
except ImportError:
    sys.exit("evaluate.py: cannot import cgq: copy clients/python/cgq/trial.py next to this script as cgq.py")

WIDTH, CLASSES, SAMPLES, EPS = 24, 10, 256, 1e-5


def rounder(dtype):
    if dtype == "float64":
        return lambda x: x
    fmt = struct.Struct("<e" if dtype == "float16" else "<f")

    def r(x):
        try:
            return fmt.unpack(fmt.pack(x))[0]
        except OverflowError:
            return math.copysign(math.inf, x)
    return r


# ---------------------------------------------------------------- the model

def make_params(model):
    rng = random.Random(zlib.crc32(model.encode()))
    n_blocks = 3 if model == "mlp" else 2
    blocks = []
    for _ in range(n_blocks):
        layers = []
        for _ in range(1 if model == "mlp" else 2):
            layers.append({
                "w": [[rng.gauss(0.0, 1.4 / math.sqrt(WIDTH)) for _ in range(WIDTH)]
                      for _ in range(WIDTH)],
                "b": [rng.gauss(0.0, 0.1) for _ in range(WIDTH)],
                "mean": [rng.gauss(0.0, 0.3) for _ in range(WIDTH)],
                "var": [rng.uniform(0.5, 2.0) for _ in range(WIDTH)],
                "gamma": [rng.uniform(0.5, 1.5) for _ in range(WIDTH)],
                "beta": [rng.gauss(0.0, 0.1) for _ in range(WIDTH)],
            })
        blocks.append(layers)
    head = {"w": [[rng.gauss(0.0, 1.0 / math.sqrt(WIDTH)) for _ in range(WIDTH)]
                  for _ in range(CLASSES)],
            "b": [rng.gauss(0.0, 0.1) for _ in range(CLASSES)]}
    return blocks, head


def fold_bn(layer, r):
    """Conv/dense + BatchNorm -> one dense layer: W' = W * g / sqrt(v + eps),
    b' = (b - mean) * g / sqrt(v + eps) + beta, stored in the target type."""
    out = {"w": [], "b": []}
    for j in range(WIDTH):
        s = layer["gamma"][j] / math.sqrt(layer["var"][j] + EPS)
        out["w"].append([r(w * s) for w in layer["w"][j]])
        out["b"].append(r((layer["b"][j] - layer["mean"][j]) * s + layer["beta"][j]))
    return out


def dot(w, x, r, pairwise):
    terms = [r(wi * xi) for wi, xi in zip(w, x)]
    if not pairwise:
        acc = 0.0
        for t in terms:
            acc = r(acc + t)
        return acc
    while len(terms) > 1:
        nxt = [r(terms[i] + terms[i + 1]) for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            nxt.append(terms[-1])
        terms = nxt
    return terms[0]


def dense(layer, x, r, pairwise):
    return [r(dot(w, x, r, pairwise) + r(b)) for w, b in zip(layer["w"], layer["b"])]


def batchnorm(layer, x, r):
    out = []
    for j, v in enumerate(x):
        d = r(v - r(layer["mean"][j]))
        inv = r(1.0 / r(math.sqrt(layer["var"][j] + EPS)))
        out.append(r(r(r(d * inv) * r(layer["gamma"][j])) + r(layer["beta"][j])))
    return out


def relu(x):
    return [v if v > 0.0 else 0.0 for v in x]


class Workload:
    """The model as run after a substitution pass (or none) in one dtype."""

    def __init__(self, model, subst, dtype):
        self.model, self.r = model, rounder(dtype)
        self.pairwise = subst == "reassoc"
        blocks, self.head = make_params(model)
        self.folded = subst == "bn_fold"
        self.blocks = [[fold_bn(l, self.r) if self.folded else l for l in layers]
                       for layers in blocks]

    def layer(self, l, x):
        y = dense(l, x, self.r, self.pairwise)
        return y if self.folded else batchnorm(l, y, self.r)

    def run(self, x):
        """Returns (breakpoints, logits); a breakpoint per block."""
        r = self.r
        x = [r(v) for v in x]
        points = []
        for layers in self.blocks:
            if self.model == "mlp":
                x = relu(self.layer(layers[0], x))
            else:  # residual: relu(x + bn(dense(relu(bn(dense(x))))))
                h = relu(self.layer(layers[0], x))
                h = self.layer(layers[1], h)
                x = relu([r(a + b) for a, b in zip(x, h)])
            points.append(x)
        return points, dense(self.head, x, r, self.pairwise)


# ---------------------------------------------------------------- comparing

def compare(a, b):
    """max |a-b|, mean |a-b|, and max |a-b| relative to the scale of the
    tensor (max |a|), over flat lists: a is before, b after."""
    diffs = []
    for u, v in zip(a, b):
        d = abs(u - v) if math.isfinite(u) and math.isfinite(v) else (0.0 if u == v else math.inf)
        diffs.append(d)
    scale = max(abs(u) for u in a if math.isfinite(u)) if any(map(math.isfinite, a)) else 0.0
    return max(diffs), sum(diffs) / len(diffs), max(diffs) / max(scale, 1e-30)


def argmax(v):
    return max(range(len(v)), key=lambda i: v[i])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["mlp", "resnet"], required=True)
    ap.add_argument("--subst", choices=["none", "bn_fold", "reassoc"], required=True)
    ap.add_argument("--dtype", choices=["float16", "float32", "float64"], required=True)
    ap.add_argument("--ratio", type=float, default=0.25)
    a = ap.parse_args()
    if not 0.0 < a.ratio <= 1.0:
        ap.error("--ratio must be in (0, 1]")

    data_rng = random.Random(3)
    data = [[data_rng.gauss(0.0, 1.0) for _ in range(WIDTH)] for _ in range(SAMPLES)]
    data = data[:max(1, int(round(a.ratio * SAMPLES)))]

    reference = Workload(a.model, "none", "float64")  # labels
    before = Workload(a.model, "none", a.dtype)
    after = Workload(a.model, a.subst, a.dtype)

    n_points = len(before.blocks)
    flat_b = [[] for _ in range(n_points + 1)]
    flat_a = [[] for _ in range(n_points + 1)]
    agree = correct_b = correct_a = 0
    for x in data:
        label = argmax(reference.run(x)[1])
        pb, lb = before.run(x)
        pa, la = after.run(x)
        for i in range(n_points):
            flat_b[i].extend(pb[i])
            flat_a[i].extend(pa[i])
        flat_b[-1].extend(lb)
        flat_a[-1].extend(la)
        agree += argmax(lb) == argmax(la)
        correct_b += argmax(lb) == label
        correct_a += argmax(la) == label

    names = ["block%d" % (i + 1) for i in range(n_points)] + ["logits"]
    for i, name in enumerate(names):
        mx, mean, rel = compare(flat_b[i], flat_a[i])
        cgq.report(breakpoint=i + 1, name=name, max_abs_diff=mx, mean_abs_diff=mean,
                   max_rel_diff=rel)
    mx, mean, rel = compare(flat_b[-1], flat_a[-1])
    n = len(data)
    cgq.result(model=a.model, subst=a.subst, dtype=a.dtype, samples=n,
               max_abs_diff=mx, mean_abs_diff=mean, max_rel_diff=rel,
               top1_agree=agree / n, acc_before=correct_b / n, acc_after=correct_a / n)
    print("%s %s %s on %d samples: logits max |diff| %.3g (rel %.3g), top-1 agree %.3f, "
          "accuracy %.3f -> %.3f" % (a.model, a.subst, a.dtype, n, mx, rel, agree / n,
                                     correct_b / n, correct_a / n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
