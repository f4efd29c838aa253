#!/usr/bin/env python3
"""Prints the leaderboard of a predictor tuning job from `cgq run --format json`
(stdin): each succeeded trial's validation and test SRCC, +-10 % accuracy and
MAPE with its hyper-parameters, best first, and where the best model is.

    cgq run orchestration/examples/predictor/tune.yaml --format json | python3 leaderboard.py

Standard library only. Exit status 1 when the job did not finish with a
succeeded trial."""

import json
import os
import sys


def main():
    try:
        doc = json.load(sys.stdin)
    except ValueError as e:
        sys.exit("leaderboard.py: no JSON from cgq run (%s)" % e)
    obj = doc.get("objective") or {}
    metric, sign = obj.get("metric", "val_acc10"), -1 if obj.get("mode", "max") == "max" else 1
    trials = doc.get("trials", [])
    ok = [t for t in trials if t.get("state") == "succeeded" and metric in (t.get("metrics") or {})]
    ok.sort(key=lambda t: (sign * t["metrics"][metric], t["id"]))
    states = {}
    for t in trials:
        states[t.get("state")] = states.get(t.get("state"), 0) + 1
    print("job %s (%s): %s" % (doc.get("job"), doc.get("name"), ", ".join(
        "%d %s" % (n, s) for s, n in sorted(states.items()))))
    cols = ["rank", "trial", "val_acc10", "val_srcc", "val_mape", "test_acc10", "test_srcc",
            "test_mape", "epoch", "aggregation", "hidden", "layers", "lr"]
    rows = []
    for i, t in enumerate(ok[:10]):
        m, p = t["metrics"], t["params"]
        rows.append([str(i + 1), str(t["id"]), "%.1f %%" % m["val_acc10"], "%.4f" % m["val_srcc"],
                     "%.1f %%" % m["val_mape"], "%.1f %%" % m["test_acc10"],
                     "%.4f" % m["test_srcc"], "%.1f %%" % m["test_mape"],
                     str(m.get("best_epoch")), str(p.get("aggregation")), str(p.get("hidden")),
                     str(p.get("layers")), "%.3g" % p.get("lr", 0)])
    widths = [max(len(c), *(len(r[k]) for r in rows)) if rows else len(c)
              for k, c in enumerate(cols)]
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for r in rows:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths)))
    if not ok or doc.get("state") != "finished":
        sys.exit("leaderboard.py: the job did not finish with a succeeded trial")
    best = ok[0]
    d = os.path.join(".cgq", "work", "job-%s" % doc["job"], "trial-%d" % best["id"],
                     "attempt-%d" % best.get("attempts", 1))
    print("best model (trial %d, epoch %s): %s (config, scalings, metrics) and %s (weights)"
          % (best["id"], best["metrics"].get("best_epoch"), os.path.join(d, "model.json"),
             os.path.join(d, "model.f32")))
    if not os.path.exists(os.path.join(d, "model.json")):
        print("  (not on this machine: the trial ran on node %s)" % best.get("node"))
    else:
        exe = os.path.join("build", "bin", "cgq-predictor")  # make demo's build
        print("predict with it: %s predict --model %s --data DATASET_DIR_OR_MODEL.json"
              % (exe if os.path.exists(exe) else "cgq-predictor", d))


if __name__ == "__main__":
    main()
