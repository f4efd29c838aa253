#!/usr/bin/env python3
"""Writes data/cg_tiny.csv: a tiny synthetic stand-in for the CG dataset
(computational graphs of CNN families, each labelled with its inference
latency on an edge CPU), so the example needs no download.

Each row is one graph summarised by a few of the aggregates a latency
predictor sees (node counts, kernel sizes, channels, FLOPs, parameters) and
its latency in ms. The latency is a fixed function of those features plus a
per-family factor and noise: a model trained on some families and tested on
another (the GENNAPE setting) does well but not perfectly.

Deterministic: the same file every time (python3 make_data.py).
"""

import math
import os
import random

FAMILIES = {
    # name: (depth range, mean channels range, depthwise share, kernel choices, family factor)
    "resnet":      ((18, 50), (64, 512), 0.0, (3, 3, 1), 1.00),
    "mobilenetv2": ((40, 70), (16, 320), 0.45, (3, 3, 1, 5), 1.25),
    "squeezenet":  ((20, 30), (16, 256), 0.0, (1, 3), 0.90),
    "nb201":       ((15, 30), (16, 64), 0.0, (1, 3, 3), 1.10),
}
PER_FAMILY = 60
COLUMNS = ["family", "graph", "n_nodes", "n_conv", "n_dwconv", "mean_kernel", "log_channels",
           "log_mflops", "log_kparams", "max_stride", "latency_ms"]


def graph(rng, family):
    (dlo, dhi), (clo, chi), dw_share, kernels, factor = FAMILIES[family]
    depth = rng.randint(dlo, dhi)
    n_conv = depth
    n_dwconv = int(round(depth * dw_share * rng.uniform(0.8, 1.2)))
    n_nodes = n_conv + n_dwconv + rng.randint(depth // 2, depth)  # relu, add, pool, ...
    kernel = sum(rng.choice(kernels) for _ in range(depth)) / depth
    channels = math.exp(rng.uniform(math.log(clo), math.log(chi)))
    stride = rng.choice((1, 2, 2, 4))
    mflops = depth * channels * channels * kernel * kernel * 3136 / stride ** 2 / 1e6 / 8
    kparams = depth * channels * channels * kernel * kernel / 1e3 / 4
    # latency: compute-bound part, per-node overhead, depthwise layers memory-bound
    latency = (0.018 * mflops + 0.09 * n_nodes + 0.35 * n_dwconv * channels / 100) * factor
    latency *= math.exp(rng.gauss(0.0, 0.06))
    return [n_nodes, n_conv, n_dwconv, round(kernel, 4), round(math.log(channels), 4),
            round(math.log(mflops), 4), round(math.log(kparams), 4), stride, round(latency, 4)]


def main():
    rng = random.Random(20230207)
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "data", "cg_tiny.csv")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(",".join(COLUMNS) + "\n")
        for family in FAMILIES:
            for i in range(PER_FAMILY):
                row = [family, "%s-%03d" % (family, i)] + graph(rng, family)
                f.write(",".join(str(v) for v in row) + "\n")
    print("wrote %s (%d graphs)" % (path, PER_FAMILY * len(FAMILIES)))


if __name__ == "__main__":
    main()
