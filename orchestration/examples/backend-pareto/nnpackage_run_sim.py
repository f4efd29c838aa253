#!/usr/bin/env python3
"""A stand-in for ONE's nnpackage_run on a Tizen / Odroid-XU4 board (seed
002): it reads the backend of each operator from OP_BACKEND_<op> and prints a
latency and a peak memory the way nnpackage_run does. Time and memory are a
fixed function of the assignment (plus a copy cost each time consecutive
operators change backend), so the Pareto front is known; it sleeps a
tenth of the latency it reports, like a profiler would take time."""

import os
import sys
import time

# per operator: (time ms, memory KB) on each backend
COST = {
    "conv":   {"cpu": (9.0, 1800), "acl_cl": (3.0, 5200)},
    "dwconv": {"cpu": (4.0, 900),  "acl_cl": (2.5, 2600)},
    "fc":     {"cpu": (2.0, 700),  "acl_cl": (1.5, 2100)},
    "pool":   {"cpu": (0.8, 200),  "acl_cl": (1.2, 900)},
    "add":    {"cpu": (0.5, 100),  "acl_cl": (0.9, 600)},
}
OPS = ["conv", "dwconv", "fc", "pool", "add"]
SWITCH_MS = 0.7  # copying a tensor between backends


def main():
    t, m, prev = 0.0, 0, None
    for op in OPS:
        backend = os.environ.get("OP_BACKEND_" + op)
        if backend not in COST[op]:
            print("nnpackage_run: no backend for %s (set OP_BACKEND_%s to one of %s)"
                  % (op, op, ", ".join(sorted(COST[op]))), file=sys.stderr)
            return 2
        dt, dm = COST[op][backend]
        t += dt + (SWITCH_MS if prev not in (None, backend) else 0.0)
        m += dm
        prev = backend
    time.sleep(t / 10000.0)
    print("===================================")
    print("MODEL_LOAD   takes 1.2 ms")
    print("EXECUTE      takes %.3f ms" % t)
    print("- MEAN     :  %.3f ms" % t)
    print("MAX RSS    :  %d KB" % (m + 10000))
    return 0


if __name__ == "__main__":
    sys.exit(main())
