#!/usr/bin/python3
"""bench/cmaes_optuna.py: cgq's cmaes searcher against Optuna 3.1's CmaEsSampler.
(Not bench/cmaes.py: that name would shadow the cmaes package Optuna imports.)

    /usr/bin/python3 bench/cmaes_optuna.py              # a few minutes on the 2-core machine
    /usr/bin/python3 bench/cmaes_optuna.py --seeds 10   # more seeds
    /usr/bin/python3 bench/cmaes_optuna.py --quick      # 2 seeds, smaller budgets

Needs Debian's python3-optuna and python3-cmaes (the library CmaEsSampler
uses; hence /usr/bin/python3, not a pyenv python) and
./build/bin/cgq-bench-cmaes (cmake --build build). Prints figures; writes
and asserts nothing.

Quality: the mean (and median) over the seeds of the best value found at
equal budget, minimising Rosenbrock-8 (8-D on [-5, 10], optimum 0), a
shifted ellipsoid (8-D on [-5, 5], axis scales 1 .. 1e6, optimum 0), and
two problems whose params have ranges 10 .. 10,000 wide (param i on
[-5 k_i, 5 k_i], k_i = 10^(3i/7)): ellipsoid8w, the ellipsoid in each
param's own box, which is a sphere in the params' units, and sphere8w, a
sphere in each param's box, which is an ellipsoid of condition 1e6 in the
params' units (cgq searches each param's box; Optuna 3.1 the params' units
with one sigma0, the narrowest range / 6; Optuna 3.2+ the box, optuna#4443),
for
  cgq cmaes        the searcher with its defaults (no restarts)
  cgq cmaes ipop   restarts: 9
  cgq random       cgq's random search, the baseline
  optuna cmaes     Optuna 3.1 CmaEsSampler(seed=S), its defaults
  optuna ipop      CmaEsSampler(seed=S, restart_strategy="ipop")
  optuna box       CmaEsSampler(seed=S) on each param's box [0, 1], scaled to
                   its range in the objective: how Optuna 3.2+ searches
and, in the last column, the two-sided Mann-Whitney U test's p-values of cgq
cmaes against optuna cmaes and against optuna box over the seeds (SciPy;
"-" without it): the
seeds' spread is wide, so a gap with p well above 0.05 is noise (it took
100 seeds to show that the 13-27 % gap seen with 10 was one).
cgq's searcher is driven in one process by cgq-bench-cmaes through
searcher.h (suggest a whole generation, evaluate, observe); Optuna runs
study.optimize one trial at a time, which for CMA-ES is the same: a
generation is told once all of it is evaluated.

Cost: milliseconds per trial (Optuna: ask, suggest every param, tell; cgq:
suggest, observe, the generations' updates included) over a search of N
trials of the ellipsoid.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np
import optuna

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVE = os.path.join(ROOT, "build", "bin", "cgq-bench-cmaes")

SHIFT = [1.5, -2.5, 0.5, 3.0, -1.0, 2.0, -3.5, 0.25]  # as in cmaes_drive.c


def rosenbrock8(x):
    return sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (x[i] - 1) ** 2 for i in range(7))


def ellipsoid8(x):
    return sum(1e6 ** (i / 7.0) * (x[i] - SHIFT[i]) ** 2 for i in range(8))


K = [10 ** (3 * i / 7.0) for i in range(8)]  # as in cmaes_drive.c


def ellipsoid8w(x):
    return ellipsoid8([x[i] / K[i] for i in range(8)])


def sphere8w(x):
    return sum((x[i] / K[i] - SHIFT[i]) ** 2 for i in range(8))


FUNCS = {
    "rosenbrock8": (rosenbrock8, [(-5, 10)] * 8, 0.0),
    "ellipsoid8": (ellipsoid8, [(-5, 5)] * 8, 0.0),
    "ellipsoid8w": (ellipsoid8w, [(-5 * k, 5 * k) for k in K], 0.0),
    "sphere8w": (sphere8w, [(-5 * k, 5 * k) for k in K], 0.0),
}


def cgq(*args):
    out = subprocess.run([DRIVE] + [str(a) for a in args], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


def optuna_study(name, seed, ipop):
    kw = {"restart_strategy": "ipop"} if ipop else {}
    return optuna.create_study(sampler=optuna.samplers.CmaEsSampler(seed=seed, **kw))


def optuna_run(name, seed, budget, ipop, box=False):
    """box: suggest each param in [0, 1] and scale it to its range in the
    objective, which is what CmaEsSampler does itself since Optuna 3.2
    (optuna#4443) for floats: Optuna 3.1 driven as 3.2+ would search."""
    fn, bounds, _ = FUNCS[name]
    study = optuna_study(name, seed, ipop)
    if box:
        study.optimize(lambda t: fn([lo + (hi - lo) * t.suggest_float("x%d" % i, 0, 1)
                                     for i, (lo, hi) in enumerate(bounds)]), n_trials=budget)
    else:
        study.optimize(lambda t: fn([t.suggest_float("x%d" % i, lo, hi)
                                     for i, (lo, hi) in enumerate(bounds)]), n_trials=budget)
    return study.best_value


def optuna_cost(name, n):
    t0 = time.perf_counter()
    optuna_run(name, 1, n, False)
    return (time.perf_counter() - t0) / n * 1e3


def mwu_p(a, b):
    try:
        from scipy.stats import mannwhitneyu
    except ImportError:
        return "-"
    return "%.2g" % mannwhitneyu(a, b, alternative="two-sided").pvalue


def fmt(v):
    return "%.4g" % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="2 seeds, smaller budgets")
    ap.add_argument("--budget", action="append", default=[], metavar="FUNC=N",
                    help="trials per search (default 1000 each)")
    ap.add_argument("--funcs", default=",".join(FUNCS),
                    help="comma-separated functions (default: %(default)s)")
    ap.add_argument("--no-cost", action="store_true", help="skip the cost table")
    args = ap.parse_args()
    if not os.access(DRIVE, os.X_OK):
        sys.exit("bench/cmaes_optuna.py: %s is missing (cmake --build build)" % DRIVE)
    try:
        import cmaes  # noqa: F401  (CmaEsSampler needs it)
    except ImportError:
        sys.exit("bench/cmaes_optuna.py: the cmaes package is missing (apt-get install python3-cmaes)")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    funcs = args.funcs.split(",")
    for f in funcs:
        if f not in FUNCS:
            sys.exit("bench/cmaes_optuna.py: unknown function %r (known: %s)"
                     % (f, ", ".join(FUNCS)))
    budgets = {f: 1000 for f in funcs}
    seeds = args.seeds
    if args.quick:
        budgets = {f: 300 for f in funcs}
        seeds = 2
    for b in args.budget:
        k, v = b.split("=")
        if k not in FUNCS:
            sys.exit("bench/cmaes_optuna.py: --budget %s: unknown function %r" % (b, k))
        budgets[k] = int(v)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print("bench/cmaes_optuna.py: Optuna %s, cmaes %s, numpy %s, %d seeds; load average %.2f on %d "
          "cores" % (optuna.__version__, cmaes.__version__, np.__version__, seeds, load,
                     os.cpu_count()))
    print()
    print("## Best value at equal budget (minimised; mean / median over seeds)")
    print()
    cols = ["cgq cmaes", "cgq cmaes ipop", "cgq random", "optuna cmaes", "optuna ipop",
            "optuna box"]
    print("| function (optimum) | trials | " + " | ".join(cols) + " | p: cgq vs optuna / vs box |")
    print("|---|---|" + "---|" * (len(cols) + 1))
    for name, budget in budgets.items():
        res = {c: [] for c in cols}
        secs = {c: 0.0 for c in cols}
        for seed in range(1, seeds + 1):
            for c in cols:
                t0 = time.perf_counter()
                if c == "cgq cmaes":
                    v = cgq("run", name, "cmaes", seed, budget)["best"]
                elif c == "cgq cmaes ipop":
                    v = cgq("run", name, "cmaes", seed, budget, 9)["best"]
                elif c == "cgq random":
                    v = cgq("run", name, "random", seed, budget)["best"]
                elif c == "optuna box":
                    v = optuna_run(name, seed, budget, False, box=True)
                else:
                    v = optuna_run(name, seed, budget, c.endswith("ipop"))
                secs[c] += time.perf_counter() - t0
                res[c].append(v)
        cells = ["%s / %s" % (fmt(statistics.mean(r)), fmt(statistics.median(r)))
                 for r in res.values()]
        p = "%s / %s" % (mwu_p(res["cgq cmaes"], res["optuna cmaes"]),
                         mwu_p(res["cgq cmaes"], res["optuna box"]))
        print("| %s (%s) | %d | %s | %s |" % (name, FUNCS[name][2], budget, " | ".join(cells), p))
        print("|   wall s per search | | %s | |" % " | ".join(
            "%.3f" % (secs[c] / seeds) for c in cols), flush=True)
    if args.no_cost:
        return
    print()
    print("## Cost of one trial (ms), over a search of N trials (ellipsoid8)")
    print()
    print("| N | cgq cmaes | optuna cmaes | optuna / cgq |")
    print("|---|---|---|---|")
    for n in ((200,) if args.quick else (200, 1000)):
        c = cgq("cost", "ellipsoid8", n)["ms"]
        o = optuna_cost("ellipsoid8", n)
        print("| %d | %.4f | %.2f | %.0fx |" % (n, c, o, o / c), flush=True)


if __name__ == "__main__":
    main()
