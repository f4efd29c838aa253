#!/usr/bin/env python3
"""bench/sentinel.py: what Redis Sentinel costs and how fast it fails over
(docs/operations.md, *Redis Sentinel and replicas*). Not in `make bench`.

Each part starts its own Redis master, replica and three redis-sentinel
processes on free loopback ports (tests/faults/test_sentinel.py's HaSet:
AOF everysec, sentinels with down-after-milliseconds --down-after), a
coordinator given --redis sentinel://... and a worker, all stopped by PID.

  failover   --repeat times, a fresh set each time: a job of short trials
             (sleep 0.05) keeps the worker's slots busy, the master is
             killed with -9, and measured from the kill: the sentinels name
             the new master, and the first trial.running event the new
             master records after the kill (the first dispatch on it).
             With --redis-replicas 1 (the new master has no replica until
             the old one comes back: Acks wait, dispatch does not).
  wait cost  one set, one worker of --cpus slots; a job of --trials no-op
             trials run with --redis-replicas 0 and 1, alternated --rounds
             times on the same machine in the same run: trials/s of each,
             and their ratio (the cost of WAIT 1 in each batch's round trip).

Prints each run and the medians. Asserts nothing about time; on a busy
machine the figures mean little.

    python3 bench/sentinel.py [--repeat 5] [--trials 20000] [--rounds 3] [--cpus 8]
    python3 bench/sentinel.py --repeat 1 --trials 200 --rounds 1    # a smoke run
"""

import argparse
import os
import shutil
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("CGQ_BIN_DIR", os.path.join(BENCH, "..", "build", "bin"))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "integration"))
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "faults"))
import harness  # noqa: E402
import test_sentinel  # noqa: E402  (HaSet)

BUSY = '''name: bench-failover
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, samples: 1000000}
objective: {metric: score, mode: max}
trial:
  command: "sleep 0.05; echo '{{\\"score\\": 1}}' >&3"
  resources: {cpu: 1}
'''


class _Owner:
    """What HaSet.wait_ready needs of a test: .cluster.wait_for."""

    def __init__(self, c):
        self.cluster = c


def ha_cluster(run, down_after_ms):
    ha = test_sentinel.HaSet(run.c.tmp, run.c.logdir)
    mport = ha.start_redis("master")
    ha.start_redis("replica", replica_of=mport)
    ha.start_sentinels(mport)
    if down_after_ms != 1000:
        for port, _, _ in ha.sentinels:
            r = harness.Redis("127.0.0.1", port)
            r.cmd("SENTINEL", "SET", test_sentinel.NAME, "down-after-milliseconds",
                  str(down_after_ms))
            r.close()
    ha.wait_ready(_Owner(run.c))
    run.c.redis_url = ha.url()
    run.c.redis = harness.Redis("127.0.0.1", mport)
    return ha, mport


def failover_once(a, r):
    with harness.BenchCluster("bench/sentinel.py", "cgq-bench-sentinel-", a.keep) as run:
        c = run.c
        ha = None
        try:
            ha, old = ha_cluster(run, a.down_after)
            c.start_coordinator(extra=("--redis-replicas", "1", "--log-level", "warn"))
            c.start_worker("w1", cpus=a.cpus, extra=("--log-level", "warn"))
            j = c.submit(c.write_file("busy.yaml", BUSY))
            c.wait_for(lambda: int(c.job(j).get("succeeded", "0")) >= 2 * a.cpus, 60,
                       "the job to run")
            time.sleep(0.5)
            t_kill = time.time()
            ha.redis["master"][2].kill9()
            c.redis.close()
            c.wait_for(lambda: all(ha.master_port(i) != old for i in range(3)), 60,
                       "the sentinels to name a new master", interval=0.01)
            named = time.time()
            c.redis = harness.Redis("127.0.0.1", ha.master_port(0))
            start = "%d" % int(t_kill * 1000)

            def first():
                for i, f in c.redis.cmd("XRANGE", "cgq:events", start, "+", "COUNT", 4000) or []:
                    if dict(zip(f[0::2], f[1::2])).get("type") == "trial.running":
                        return int(i.split("-")[0])
                return None
            c.wait_for(first, 60, "a dispatch on the new master", interval=0.01)
            out = ((named - t_kill) * 1000, first() - t_kill * 1000)
            print("  failover %d: new master named %7.0f ms, first dispatch on it %7.0f ms "
                  "after the kill" % (r + 1, out[0], out[1]), flush=True)
            # The coordinator and the worker first, then the Redis set.
            for p in reversed(c.procs):
                p.stop()
            c.procs, c.coordinator = [], None
            run.ok = True
            return out
        finally:
            if ha is not None:
                ha.stop()


def wait_cost(a):
    rates = {0: [], 1: []}
    with harness.BenchCluster("bench/sentinel.py", "cgq-bench-sentinel-", a.keep) as run:
        c = run.c
        ha = None
        try:
            ha, _ = ha_cluster(run, a.down_after)
            for rnd in range(a.rounds):
                for n in (0, 1):
                    c.start_coordinator(extra=("--redis-replicas", str(n), "--log-level", "warn"))
                    c.start_worker("w%d-%d" % (rnd, n), cpus=a.cpus,
                                   extra=("--log-level", "warn"))
                    t0 = time.monotonic()
                    j = c.submit(c.write_file("noop.yaml", harness.noop_spec("noop", a.trials)))
                    c.wait_job(j, 600)
                    rate = a.trials / (time.monotonic() - t0)
                    rates[n].append(rate)
                    print("  round %d, --redis-replicas %d: %8.0f no-op trials/s"
                          % (rnd + 1, n, rate), flush=True)
                    for p in reversed(c.procs):
                        p.stop()
                    c.procs, c.coordinator = [], None
            run.ok = True
        finally:
            if ha is not None:
                ha.stop()
    return rates


def main():
    ap = argparse.ArgumentParser(description="Sentinel failover time and the cost of WAIT")
    ap.add_argument("--repeat", type=int, default=5, help="failovers measured (5)")
    ap.add_argument("--down-after", type=int, default=1000,
                    help="the sentinels' down-after-milliseconds (1000; Redis's default is 30000)")
    ap.add_argument("--trials", type=int, default=20000, help="no-op trials per run (20000)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of replicas 0 and 1 each (3)")
    ap.add_argument("--cpus", type=int, default=8, help="the worker's slots (8)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    a = ap.parse_args()
    harness.require_bins("bench/sentinel.py", ("cgq", "cgq-coordinator", "cgq-worker"))
    if not shutil.which("redis-sentinel"):
        sys.exit("bench/sentinel.py: redis-sentinel is not installed (apt-get install "
                 "redis-sentinel)")
    named, dispatch = [], []
    for r in range(a.repeat):
        out = failover_once(a, r)
        if out is None:
            return 1
        named.append(out[0])
        dispatch.append(out[1])
    rates = wait_cost(a)
    if not rates[0] or not rates[1]:
        return 1
    print("Redis Sentinel (%s, down-after %d ms):" % (harness.BIN_DIR, a.down_after))
    for name, v in (("new master named", named), ("first dispatch", dispatch)):
        print("  %-17s median %7.0f ms  (min %.0f, max %.0f; %d runs)"
              % (name, statistics.median(v), min(v), max(v), len(v)))
    m0, m1 = statistics.median(rates[0]), statistics.median(rates[1])
    print("  no-op trials/s   --redis-replicas 0: %.0f, 1: %.0f (median of %d; 1/0 = %.2f)"
          % (m0, m1, a.rounds, m1 / m0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
