#!/usr/bin/python3
"""bench/tpe.py: cgq's tpe searcher against Optuna 3.1's TPESampler, in one run.

    /usr/bin/python3 bench/tpe.py              # about a minute on the 2-core machine
    /usr/bin/python3 bench/tpe.py --seeds 10   # more seeds
    /usr/bin/python3 bench/tpe.py --quick      # 2 seeds, smaller budgets, no 1,000 cost

Needs Debian's python3-optuna (hence /usr/bin/python3, not a pyenv python)
and ./build/bin/cgq-bench-tpe (cmake --build build). Prints figures; writes
and asserts nothing.

Quality: the mean (and median) over the seeds of the best value found at
equal budget, minimising Branin (2-D, optimum 0.397887), Hartmann-6 (6-D,
-3.32237) and Rosenbrock-8 (8-D on [-5, 10], 0), for
  cgq tpe         the searcher (univariate, Optuna's defaults), and with
                  multivariate: true
  cgq random      cgq's random search, the baseline
  optuna tpe      Optuna 3.1 TPESampler(seed=S) with its defaults
  optuna tpe+fix  the same with optuna#5110 patched in (the kernels'
                  -log(sigma), which cgq has and Optuna 3.1 lacks), so
                  that the remaining difference is the random streams and
                  the rounding of reals to 15 digits
cgq's searcher is driven in one process by cgq-bench-tpe through searcher.h
(suggest, evaluate, observe, one trial at a time): the coordinator and the
workers would add transport to each trial and nothing to what is suggested.
Both sides run the trials one after another (no constant liar at play).

Cost: milliseconds per suggestion (Optuna: ask, suggest every param, tell;
cgq: suggest, observe) once 100, 1,000 and 10,000 trials have finished, on
Branin (2 params) and Hartmann-6 (6 params); --runs R repeats each and
prints the median (min-max); --cost-only skips the quality runs. Measure it
on an idle machine.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import optuna
from optuna.samplers._tpe import _truncnorm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVE = os.path.join(ROOT, "build", "bin", "cgq-bench-tpe")

A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
     [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
P = [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
     [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]
ALPHA = [1.0, 1.2, 3.0, 3.2]


def branin(x):
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x[1] - b * x[0] ** 2 + c * x[0] - 6) ** 2 + 10 * (1 - t) * math.cos(x[0]) + 10


def hartmann6(x):
    return -sum(ALPHA[i] * math.exp(-sum(A[i][j] * (x[j] - P[i][j] * 1e-4) ** 2
                                         for j in range(6))) for i in range(4))


def rosenbrock8(x):
    return sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (x[i] - 1) ** 2 for i in range(7))


FUNCS = {
    "branin": (branin, [(-5, 10), (0, 15)], 0.397887),
    "hartmann6": (hartmann6, [(0, 1)] * 6, -3.32237),
    "rosenbrock8": (rosenbrock8, [(-5, 10)] * 8, 0.0),
}


def cgq(*args):
    out = subprocess.run([DRIVE] + [str(a) for a in args], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)


_logpdf_31 = _truncnorm.logpdf


def _logpdf_fixed(x, a, b, loc=0, scale=1):
    return _logpdf_31(x, a, b, loc, scale) - np.log(scale)


def optuna_run(name, seed, budget, fixed):
    fn, bounds, _ = FUNCS[name]
    _truncnorm.logpdf = _logpdf_fixed if fixed else _logpdf_31
    try:
        study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
        study.optimize(lambda t: fn([t.suggest_float("x%d" % i, lo, hi)
                                     for i, (lo, hi) in enumerate(bounds)]), n_trials=budget)
        return study.best_value
    finally:
        _truncnorm.logpdf = _logpdf_31


def optuna_cost(name, n, reps):
    fn, bounds, _ = FUNCS[name]
    dists = {"x%d" % i: optuna.distributions.FloatDistribution(lo, hi)
             for i, (lo, hi) in enumerate(bounds)}
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=1))
    rng = np.random.RandomState(1)
    trials = []
    for _ in range(n):
        params = {k: float(rng.uniform(d.low, d.high)) for k, d in dists.items()}
        trials.append(optuna.trial.create_trial(params=params, distributions=dists,
                                                value=fn(list(params.values()))))
    study.add_trials(trials)
    t0 = time.perf_counter()
    for _ in range(reps):
        t = study.ask()
        x = [t.suggest_float(k, d.low, d.high) for k, d in dists.items()]
        study.tell(t, fn(x))
    return (time.perf_counter() - t0) / reps * 1e3


def fmt(v):
    return "%.4g" % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="2 seeds, smaller budgets")
    ap.add_argument("--budget", action="append", default=[], metavar="FUNC=N",
                    help="trials per search (default branin=60 hartmann6=100 rosenbrock8=150)")
    ap.add_argument("--cost-only", action="store_true",
                    help="only the cost of a suggestion (no quality runs)")
    ap.add_argument("--runs", type=int, default=1,
                    help="measure each cost this many times: median (min-max)")
    args = ap.parse_args()
    if not os.access(DRIVE, os.X_OK):
        sys.exit("bench/tpe.py: %s is missing (cmake --build build)" % DRIVE)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    budgets = {"branin": 60, "hartmann6": 100, "rosenbrock8": 150}
    seeds = args.seeds
    if args.quick:
        budgets = {"branin": 30, "hartmann6": 50, "rosenbrock8": 60}
        seeds = 2
    for b in args.budget:
        k, v = b.split("=")
        budgets[k] = int(v)
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    print("bench/tpe.py: Optuna %s, numpy %s, %d seeds; load average %.2f on %d cores"
          % (optuna.__version__, np.__version__, seeds, load, os.cpu_count()))
    print()
    if not args.cost_only:
        quality(budgets, seeds)
    cost(args.quick, max(1, args.runs))


def spread(v):
    """median (min-max) of the runs' figures, or the one figure."""
    m = statistics.median(v)
    if len(v) == 1:
        return "%.3g" % m
    return "%.3g (%.3g-%.3g)" % (m, min(v), max(v))


def quality(budgets, seeds):
    print("## Best value at equal budget (minimised; mean / median over seeds)")
    print()
    cols = ["cgq tpe", "cgq tpe multivariate", "cgq random", "optuna tpe", "optuna tpe+fix"]
    print("| function (optimum) | trials | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for name, budget in budgets.items():
        res = {c: [] for c in cols}
        secs = {c: 0.0 for c in cols}
        for seed in range(1, seeds + 1):
            for c in cols:
                t0 = time.perf_counter()
                if c == "cgq tpe":
                    v = cgq("run", name, "tpe", seed, budget)["best"]
                elif c == "cgq tpe multivariate":
                    v = cgq("run", name, "tpe", seed, budget, "multivariate")["best"]
                elif c == "cgq random":
                    v = cgq("run", name, "random", seed, budget)["best"]
                else:
                    v = optuna_run(name, seed, budget, c.endswith("+fix"))
                secs[c] += time.perf_counter() - t0
                res[c].append(v)
        cells = ["%s / %s" % (fmt(statistics.mean(r)), fmt(statistics.median(r)))
                 for r in res.values()]
        print("| %s (%s) | %d | %s |" % (name, FUNCS[name][2], budget, " | ".join(cells)))
        print("|   wall s per search | | %s |" % " | ".join(
            "%.3f" % (secs[c] / seeds) for c in cols), flush=True)
    print()


def cost(quick, runs):
    print("## Cost of one suggestion (ms), after N finished trials%s"
          % ("; median (min-max) of %d runs" % runs if runs > 1 else ""))
    print()
    print("| function | N | cgq tpe | cgq tpe multivariate | optuna tpe | optuna / cgq |")
    print("|---|---|---|---|---|---|")
    for name in ("branin", "hartmann6"):
        for n in ((100,) if quick else (100, 1000, 10000)):
            reps = 200 if n <= 100 else 50 if n <= 1000 else 10
            c, cm, o = [], [], []
            for _ in range(runs):
                c.append(cgq("cost", name, n, reps)["ms"])
                cm.append(cgq("cost", name, n, reps, "multivariate")["ms"])
                o.append(optuna_cost(name, n, 20 if n <= 100 else 5 if n <= 1000 else 2))
            print("| %s | %d | %s | %s | %s | %.0fx |" % (
                name, n, spread(c), spread(cm), spread(o),
                statistics.median(o) / statistics.median(c)), flush=True)


if __name__ == "__main__":
    main()
