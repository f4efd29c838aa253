#!/usr/bin/env python3
"""A stand-in for a training run: a known function of the hyper-parameters,
reached over a few "epochs", with a little seeded noise.

The final val_score is highest near lr=0.01, hidden=128, layers=4,
dropout=0.2, batch=64 (about 0.95). Each epoch is reported as one JSON line
through cgq_report (fd 3 under cgq-worker, stdout when run by hand):

    python3 train.py --lr 0.01 --hidden 128 --layers 4 --dropout 0.2 --batch 64
"""

import argparse
import hashlib
import math
import os
import random
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
# orchestration/examples/quickstart -> repository root -> clients/python
sys.path.insert(0, os.path.join(_HERE, "..", "..", "..", "clients", "python"))
try:
    import cgq_report as cgq  # noqa: E402
except ImportError:
    # Copied out of the repository: the whole contract is one JSON object per
    # line on the fd named by CGQ_REPORT_FD (stdout when run by hand).
    import json

    class cgq:  # noqa: N801
        @staticmethod
        def params():
            return json.loads(os.environ.get("CGQ_PARAMS", "{}"))

        @staticmethod
        def report(**metrics):
            line = (json.dumps(metrics) + "\n").encode()
            fd = int(os.environ.get("CGQ_REPORT_FD", "1"))
            os.write(fd, line)


def target(lr, hidden, layers, dropout, batch):
    """The score a perfect run would reach: a smooth bowl around the optimum."""
    score = 0.95
    score -= 0.06 * (math.log10(lr) + 2.0) ** 2
    score -= 0.08 * math.log2(hidden / 128.0) ** 2
    score -= 0.015 * (layers - 4) ** 2
    score -= 0.4 * (dropout - 0.2) ** 2
    score -= 0.0 if batch == 64 else 0.01
    return score


def main():
    p = cgq.params()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lr", type=float, default=p.get("lr", 0.01))
    ap.add_argument("--hidden", type=int, default=p.get("hidden", 128))
    ap.add_argument("--layers", type=int, default=p.get("layers", 4))
    ap.add_argument("--dropout", type=float, default=p.get("dropout", 0.2))
    ap.add_argument("--batch", type=int, default=p.get("batch", 64))
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--epoch-time", type=float, default=0.05, help="seconds per epoch")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if not a.lr > 0 or a.hidden <= 0 or a.epochs <= 0:
        ap.error("need --lr > 0, --hidden > 0 and --epochs > 0")

    # The noise depends only on the params and the seed: a re-run (retry, lost
    # worker) reports the same numbers.
    key = "%r|%d|%d|%r|%d|%d" % (a.lr, a.hidden, a.layers, a.dropout, a.batch, a.seed)
    rng = random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))
    best = target(a.lr, a.hidden, a.layers, a.dropout, a.batch)

    print("training lr=%g hidden=%d layers=%d dropout=%g batch=%d for %d epochs"
          % (a.lr, a.hidden, a.layers, a.dropout, a.batch, a.epochs), flush=True)
    for epoch in range(1, a.epochs + 1):
        time.sleep(a.epoch_time)
        progress = 1.0 - math.exp(-3.0 * epoch / a.epochs)
        val_score = best * progress / (1.0 - math.exp(-3.0)) + rng.gauss(0.0, 0.003)
        loss = (1.0 - val_score) * 2.0 + rng.gauss(0.0, 0.01)
        cgq.report(epoch=epoch, val_score=round(val_score, 6), loss=round(loss, 6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
