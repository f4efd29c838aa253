#!/usr/bin/env python3
"""bench/ask_tell.py: ask+tell round trips of a cgq study against Optuna's
shared storages, side by side in one run (docs/performance.md, *Ask and tell*).

Each system runs --trials ask+tell pairs in one process, random search over
two params (a float on a log scale, an integer), the objective computed at
once (no training: this measures the queue, not the model):

  cgq              cgq.Client().study(...): ask() is a Heartbeat with the
                   client's want, the coordinator's choice, its Redis batch
                   and the Assign; tell() is a Heartbeat and a Result (acked
                   after the batch is durable, asynchronously). A private
                   redis-server (AOF on, appendfsync everysec) and
                   cgq-coordinator from $CGQ_BIN_DIR (else ./build/bin).
  optuna-sqlite    optuna.create_study(storage="sqlite:///..."), the RDB
                   storage Optuna documents for several processes on one host;
                   study.ask(distributions) / study.tell(trial, value).
  optuna-journal   JournalStorage(JournalRedisStorage(URL)) on the same
                   redis-server as cgq's.

Each pair is timed (ask start to tell return); the first 20 pairs of each
run are warm-up and not counted. Prints per system p50/p99 of a pair and
pairs per second, the median over --repeat runs with min and max, and the
ratios to cgq. Asserts nothing about time. Needs Debian's python3-optuna,
python3-redis, python3-zmq, python3-protobuf and the cgq package importable
(pip install ./clients/python into a --system-site-packages venv, or
PYTHONPATH set to a directory holding it with cgq_pb2 generated).

With --procs N (N > 1), N processes ask and tell the same study at once,
--trials pairs in all: the case a shared storage is for (several workers
of one search). Each process times its own pairs; the rate is all pairs
over the time from the first start to the last end.

With --prefetch N the cgq study holds N trials ready ahead of the asks
(docs/python.md): an ask returns at once, without a round trip.

    python3 bench/ask_tell.py [--trials 1000] [--repeat 3] [--procs 1] [--prefetch 0]
                              [--only cgq,optuna-sqlite,optuna-journal]
"""

import argparse
import json
import os
import subprocess
import statistics
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("CGQ_BIN_DIR", os.path.join(BENCH, "..", "build", "bin"))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "integration"))
import harness  # noqa: E402

WARMUP = 20


def objective(lr, layers):
    return (lr - 0.01) ** 2 + 0.001 * layers


def summary(lat, wall):
    lat = sorted(lat)
    return {"p50": lat[len(lat) // 2] * 1e3, "p99": lat[int(len(lat) * 0.99)] * 1e3,
            "rate": len(lat) / wall}


SPACE = {"lr": {"loguniform": [1e-4, 1e-1]}, "layers": {"randint": [2, 6]}}


PREFETCH = int(os.environ.get("CGQ_BENCH_PREFETCH", "0"))


def cgq_study(redis_url, control, seed, n, new):
    import cgq
    client = cgq.Client(redis=redis_url, coordinator=control)
    if not new:
        return client.study(name="bench-%d" % seed, prefetch=PREFETCH)
    return client.study(name="bench-%d" % seed, new=True, space=SPACE, prefetch=PREFETCH,
                        objective={"metric": "loss", "mode": "min"},
                        search={"algorithm": "random", "seed": seed, "samples": n})


def run_cgq(c, n, seed, study=None):
    study = study or cgq_study(c.redis_url, c.control_ep, seed, n + WARMUP, True)
    lat = []
    start = None
    for i in range(n + WARMUP):
        if i == WARMUP:
            start = time.perf_counter()
        a = time.perf_counter()
        t = study.ask(wait=30)
        study.tell(t, loss=objective(t.params["lr"], t.params["layers"]))
        if i >= WARMUP:
            lat.append(time.perf_counter() - a)
    wall = time.perf_counter() - start
    end = time.time()
    study.close()  # waits for the last Acks: --durable-after, not the pairs
    res = summary(lat, wall)
    res["end"] = end
    return res


def optuna_storage(kind, tmp, redis_url, seed):
    if kind == "optuna-sqlite":
        return "sqlite:///%s/o-%d.db" % (tmp, seed)
    import warnings
    import optuna
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return optuna.storages.JournalStorage(optuna.storages.JournalRedisStorage(redis_url))


def run_optuna(storage, n, seed, load=False):
    import optuna
    from optuna.distributions import FloatDistribution, IntDistribution
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {"lr": FloatDistribution(1e-4, 1e-1, log=True), "layers": IntDistribution(2, 6)}
    sampler = optuna.samplers.RandomSampler(seed=seed + os.getpid() if load else seed)
    if load:
        study = optuna.load_study(storage=storage, study_name="bench-%d" % seed, sampler=sampler)
    else:
        study = optuna.create_study(storage=storage, study_name="bench-%d" % seed,
                                    sampler=sampler)
    lat = []
    start = None
    for i in range(n + WARMUP):
        if i == WARMUP:
            start = time.perf_counter()
        a = time.perf_counter()
        t = study.ask(dists)
        study.tell(t, objective(t.params["lr"], t.params["layers"]))
        if i >= WARMUP:
            lat.append(time.perf_counter() - a)
    wall = time.perf_counter() - start
    res = summary(lat, wall)
    res["end"] = time.time()
    return res


def worker(argv):
    """One of --procs processes: bench/ask_tell.py --worker SYSTEM REDIS CONTROL TMP SEED N.
    Waits for a line on stdin (the start), runs N pairs, prints its figures."""
    system, redis_url, control, tmp, seed, n = argv
    seed, n = int(seed), int(n)
    if system == "cgq":
        study = cgq_study(redis_url, control, seed, n, False)
        sys.stdin.readline()
        t0 = time.time()
        res = run_cgq(None, n, seed, study)
    else:
        storage = optuna_storage(system, tmp, redis_url, seed)
        sys.stdin.readline()
        t0 = time.time()
        res = run_optuna(storage, n, seed, load=True)
    res["start"] = t0
    print(json.dumps(res), flush=True)


def run_parallel(system, c, tmp, n, seed, procs):
    """procs processes, n pairs in all, on one study made here first."""
    each = n // procs
    if system == "cgq":
        cgq_study(c.redis_url, c.control_ep, seed, (each + WARMUP) * procs, True)
    else:
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        optuna.create_study(storage=optuna_storage(system, tmp, c.redis_url, seed),
                            study_name="bench-%d" % seed)
    ps = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", system,
                            c.redis_url, c.control_ep, tmp, str(seed), str(each)],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
          for _ in range(procs)]
    time.sleep(2.0)  # every process connected and loaded
    for p in ps:
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [json.loads(p.communicate(timeout=600)[0].strip().splitlines()[-1]) for p in ps]
    wall = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    return {"p50": statistics.median(o["p50"] for o in outs),
            "p99": max(o["p99"] for o in outs), "rate": each * procs / wall}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        return worker(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="cgq,optuna-sqlite,optuna-journal")
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--prefetch", type=int, default=0,
                    help="cgq: trials held ready ahead of the asks (study prefetch=)")
    args = ap.parse_args()
    global PREFETCH
    PREFETCH = args.prefetch
    os.environ["CGQ_BENCH_PREFETCH"] = str(args.prefetch)  # the --procs workers
    systems = [s for s in args.only.split(",") if s]
    results = {s: [] for s in systems}
    with harness.BenchCluster("bench/ask_tell.py", "cgq-bench-asktell-") as run:
        c = run.c
        c.start_redis(appendonly=True)
        c.redis.cmd("CONFIG", "SET", "appendfsync", "everysec")  # as cgq run and compose
        c.start_coordinator(heartbeat="1s")
        tmp = tempfile.mkdtemp(prefix="cgq-bench-optuna-")
        for r in range(args.repeat):
            for s in systems:
                seed = r * 100 + systems.index(s)
                if s not in ("cgq", "optuna-sqlite", "optuna-journal"):
                    sys.exit("unknown system %r" % s)
                if args.procs > 1:
                    res = run_parallel(s, c, tmp, args.trials, seed, args.procs)
                elif s == "cgq":
                    res = run_cgq(c, args.trials, seed)
                else:
                    res = run_optuna(optuna_storage(s, tmp, c.redis_url, seed), args.trials, seed)
                results[s].append(res)
                print("run %d %-15s p50 %7.3f ms  p99 %7.3f ms  %8.0f pairs/s"
                      % (r + 1, s, res["p50"], res["p99"], res["rate"]), flush=True)
        run.ok = True
    print("\n%d ask+tell pairs in %d process(es), median of %d runs (min-max):"
          % (args.trials, args.procs, args.repeat))
    med = {}
    for s in systems:
        rs = results[s]
        line = []
        for k, unit in (("p50", "ms"), ("p99", "ms"), ("rate", "pairs/s")):
            v = [x[k] for x in rs]
            med[(s, k)] = statistics.median(v)
            line.append("%s %.3g %s (%.3g-%.3g)" % (k, med[(s, k)], unit, min(v), max(v)))
        print("  %-15s %s" % (s, ", ".join(line)))
    if "cgq" in systems:
        for s in systems:
            if s != "cgq":
                print("  cgq vs %-15s %.1fx the pairs/s, p50 %.1fx lower"
                      % (s, med[("cgq", "rate")] / med[(s, "rate")],
                         med[(s, "p50")] / med[("cgq", "p50")]))


if __name__ == "__main__":
    main()
