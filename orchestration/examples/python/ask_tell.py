#!/usr/bin/env python3
"""cgq from Python, notebook style, on a private cluster that lives for the
script: ask-and-tell with the bayes searcher and ASHA, the same search as a
submitted job run by workers, and both read back into pandas.

    python3 -m venv --system-site-packages .venv && .venv/bin/pip install ./clients/python
    .venv/bin/python orchestration/examples/python/ask_tell.py

cgq.local() starts redis-server, cgq-coordinator and a worker from
$CGQ_BIN_DIR, or next to `cgq` on PATH, or ./build/bin of this checkout;
everything is stopped (by PID) when the block ends. Point cgq.Client() at a
lab's cluster instead (CGQ_REDIS, CGQ_COORDINATOR) and the rest is the same.
"""

import math
import os
import sys

import cgq

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.join(HERE, "..", "..", "..", "build", "bin")

SPACE = {"lr": {"loguniform": [1e-4, 1e-1]}, "layers": {"randint": [2, 8]},
         "dropout": {"uniform": [0.0, 0.5]}}


def train_one_epoch(p, epoch):
    """A stand-in for training: a loss curve whose floor depends on the params."""
    floor = (math.log10(p["lr"]) + 2.5) ** 2 * 0.1 + abs(p["layers"] - 5) * 0.02 \
        + (p["dropout"] - 0.2) ** 2
    return floor + 1.0 / (epoch + 1)


def main():
    bin_dir = os.environ.get("CGQ_BIN_DIR") or (BIN if os.path.isdir(BIN) else None)
    with cgq.local(workers=1, bin_dir=bin_dir) as c:
        # 1. Ask and tell: the trials run here, in this loop.
        study = c.study(name="ask-tell", space=SPACE,
                        objective={"metric": "loss", "mode": "min"},
                        search={"algorithm": "bayes", "seed": 1, "samples": 30},
                        early_stop={"algorithm": "asha", "metric": "loss", "mode": "min",
                                    "time_attr": "epoch", "max_t": 9})
        while (t := study.ask()) is not None:
            for epoch in range(10):
                loss = train_one_epoch(t.params, epoch)
                t.report(epoch=epoch, loss=loss)
                if t.should_stop():
                    break
            study.tell(t, loss=loss)
        study.close()
        df = study.job.to_pandas()
        print("ask and tell: %d trials, %d stopped early by ASHA"
              % (len(df), (df["state"] == "stopped").sum()))
        print(df.sort_values("value").head(5)[["id", "state", "value", "lr", "layers",
                                                "dropout"]].to_string(index=False))

        # 2. The same space as a job that workers run (the built-in noop
        #    trial reports the numeric params as metrics: a cluster check).
        job = c.submit({"name": "workers", "space": SPACE,
                        "search": {"algorithm": "random", "seed": 2, "samples": 20},
                        "objective": {"metric": "dropout", "mode": "min"},
                        "trial": {"kind": "noop", "resources": {"cpu": 1}}})
        print("\nsubmitted job %d: %s" % (job.id, job.wait(progress=sys.stderr.isatty())))
        print("best:", job.best())
    return 0


if __name__ == "__main__":
    sys.exit(main())
