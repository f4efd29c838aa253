#!/usr/bin/env python3
"""bench/dashboard.py: what the dashboard's API costs (issue 27, *Measured*).

1. The trials list of a big ended job, and the job page's charts: a job of --trials trials (params,
   metrics, a log line each) written straight into a private Redis as the
   coordinator writes them (docs/architecture.md, *Redis data model*), then
   GET /api/jobs/1/trials?limit=50 of a coordinator started with --http,
   --requests times per order: by id, best first (rank), by a param, by a
   metric that is not the objective and by value with a state filter. The
   first request of an order reads and sorts the whole job (what a running
   job costs every poll); the next ones find an ended job's order kept.
   Then the charts' calls (progress, curves, importance, sample), which
   keep nothing: each reads the job. Prints cold (first) and warm p50/p99
   in ms and the answer's size.
2. The coordinator's no-op throughput with a browser's polling and without:
   a job of --noop no-op trials over two workers, run twice: alone, then
   with a client polling /api/jobs/J and /api/jobs/J/trials every --poll s
   (a job page polls both every 2 s). Prints trials/s of each and the change.

Prints; asserts nothing about time. Not in `make bench`.

    python3 bench/dashboard.py [--trials 100000] [--requests 50] [--noop 20000] [--poll 1]
"""

import argparse
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("CGQ_BIN_DIR", os.path.join(BENCH, "..", "build", "bin"))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "integration"))
import harness  # noqa: E402


def get(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise AssertionError("GET %s: %d %s" % (path, r.status, body[:300]))
        return body
    finally:
        conn.close()


def fill(c, n):
    """Job 1, ended, of n trials, written as the coordinator writes them."""
    rnd = random.Random(1)
    now = time.time()
    c.redis.pipeline([
        ("HSET", "cgq:job:{1}", "id", 1, "name", "bench-dashboard", "state", "finished",
         "suggested", n, "total", n, "objective_metric", "acc", "objective_mode", "max",
         "created", now - 3600, "finished", now, "succeeded", n, "spec", "name: bench"),
        ("ZADD", "cgq:jobs", now - 3600, 1),
    ])
    batch = []
    for i in range(n):
        acc = rnd.random()
        batch.append(("HSET", "cgq:job:{1}:trial:%d" % i, "id", i, "job", 1,
                      "state", "succeeded", "attempt", 1, "node", "w%d" % (i % 8),
                      "params", json.dumps({"lr": 10 ** rnd.uniform(-5, -1),
                                            "layers": rnd.randint(1, 8),
                                            "opt": rnd.choice(["adam", "sgd", "rmsprop"])}),
                      "metrics", json.dumps({"acc": acc, "loss": 1 - acc}), "value", acc,
                      "started", now - 3600 + i * 0.01, "finished", now - 3600 + i * 0.01 + 5,
                      "duration", 5, "log", "epoch 10/10 acc=%.4f\n" % acc))
        if len(batch) == 2000:
            c.redis.pipeline(batch)
            batch = []
    if batch:
        c.redis.pipeline(batch)


def api_costs(a):
    print("the trials list of an ended job of %d trials (limit 50):" % a.trials, flush=True)
    with harness.BenchCluster("bench/dashboard.py", "cgq-bench-dash-", False) as run:
        c = run.c
        c.start_redis()
        fill(c, a.trials)
        port = harness.free_port()
        c.start_coordinator(extra=("--log-level", "warn", "--http", "127.0.0.1:%d" % port))
        for name, path in (("by id", "trials?limit=50&sort=id"),
                           ("best first", "trials?limit=50&sort=rank"),
                           ("by a param", "trials?limit=50&sort=params.lr&order=desc"),
                           ("by a metric", "trials?limit=50&sort=metrics.loss"),
                           ("filtered", "trials?limit=50&sort=value&state=succeeded"),
                           # The job page's charts (docs/dashboard.md): each
                           # reads the job (importance: 20,000 at most).
                           ("progress", "progress"), ("curves", "curves?limit=5"),
                           ("importance", "importance"), ("sample", "sample?limit=300")):
            times, size = [], 0
            for _ in range(a.requests):
                t = time.monotonic()
                size = len(get(port, "/api/jobs/1/" + path))
                times.append((time.monotonic() - t) * 1000)
            warm = sorted(times[1:]) or times
            print("  %-12s cold %8.1f ms, then p50 %6.1f ms, p99 %6.1f ms (%d requests, %d bytes)"
                  % (name, times[0], statistics.median(warm),
                     warm[min(len(warm) - 1, int(len(warm) * 0.99))], len(times), size),
                  flush=True)
        run.ok = True
    return run.ok


def throughput(a, poll):
    with harness.BenchCluster("bench/dashboard.py", "cgq-bench-dash-", False) as run:
        c = run.c
        c.start_redis()
        port = harness.free_port()
        c.start_coordinator(extra=("--log-level", "warn", "--http", "127.0.0.1:%d" % port))
        for w in ("w1", "w2"):
            c.start_worker(w, cpus=32, extra=("--log-level", "warn"))
        stop = threading.Event()
        polls = [0]
        j = c.submit(c.write_file("noop.yaml", harness.noop_spec("bench-dash", a.noop)))

        def poller():
            while not stop.wait(a.poll):
                get(port, "/api/jobs/%d" % j)
                get(port, "/api/jobs/%d/trials?limit=50" % j)
                polls[0] += 1
        t0 = time.monotonic()
        th = threading.Thread(target=poller, daemon=True)
        if poll:
            th.start()
        c.wait_job(j, timeout=a.timeout)
        rate = a.noop / (time.monotonic() - t0)
        stop.set()
        if poll:
            th.join(30)
        run.ok = c.job(j).get("succeeded") == str(a.noop)
    return rate if run.ok else None, polls[0]


def main():
    ap = argparse.ArgumentParser(description="what the dashboard's API costs")
    ap.add_argument("--trials", type=int, default=100000)
    ap.add_argument("--requests", type=int, default=50, help="per order (50)")
    ap.add_argument("--noop", type=int, default=20000, help="no-op trials per run (20000)")
    ap.add_argument("--poll", type=float, default=1.0, help="seconds between polls (1)")
    ap.add_argument("--timeout", type=float, default=600)
    a = ap.parse_args()
    harness.require_bins("bench/dashboard.py", ("cgq", "cgq-coordinator", "cgq-worker"))
    if not api_costs(a):
        return 1
    alone, _ = throughput(a, False)
    polled, polls = throughput(a, True)
    if alone is None or polled is None:
        return 1
    print("no-op throughput: %.0f trials/s alone, %.0f with a page polling every %gs "
          "(%d polls): %+.1f %%" % (alone, polled, a.poll, polls, (polled / alone - 1) * 100))
    return 0


if __name__ == "__main__":
    sys.exit(main())
