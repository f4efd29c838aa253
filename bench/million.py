#!/usr/bin/env python3
"""bench/million.py: one job of 1,000,000 no-op trials, to show that the
coordinator's memory and its cost per trial stay flat as a job grows
(docs/performance.md, *A million trials*). `make bench` runs it.

A private redis-server (no persistence, as bench/run's), one coordinator and
two workers of --cpus slots each, all from $CGQ_BIN_DIR (else ./build/bin),
and one job of --trials no-op trials. While it runs, every --every trials
(by the job hash's `succeeded`) it samples the coordinator's RSS (VmRSS) and
its CPU time (user + system, all threads, /proc/PID/stat), and prints per
window: trials/s, coordinator CPU µs per trial and RSS. At the end: Redis
`used_memory` per finished trial. A flat run has the same CPU per trial and
the same RSS in the last window as in the first. Prints; asserts nothing
about time.

    python3 bench/million.py [--trials 1000000] [--every 100000] [--cpus 64]
"""

import argparse
import os
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("CGQ_BIN_DIR", os.path.join(BENCH, "..", "build", "bin"))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "integration"))
import harness  # noqa: E402

def used_memory(c):
    for line in (c.redis.cmd("INFO", "memory") or "").splitlines():
        if line.startswith("used_memory:"):
            return int(line.split(":")[1])
    return 0


def main():
    ap = argparse.ArgumentParser(description="a job of a million no-op trials: flat or not")
    ap.add_argument("--trials", type=int, default=1000000)
    ap.add_argument("--every", type=int, default=100000, help="trials per window (100000)")
    ap.add_argument("--cpus", type=int, default=64, help="slots per worker (64; two workers)")
    ap.add_argument("--timeout", type=float, default=300, help="give up after this many s")
    a = ap.parse_args()
    harness.require_bins("bench/million.py", ("cgq", "cgq-coordinator", "cgq-worker"))
    rows = []
    with harness.BenchCluster("bench/million.py", "cgq-bench-million-", False) as run:
        c = run.c
        c.start_redis()
        c.start_coordinator(extra=("--log-level", "warn", "--max-trials", str(a.trials)))
        for w in ("w1", "w2"):
            c.start_worker(w, cpus=a.cpus, extra=("--log-level", "warn"))
        pid = c.coordinator.pid
        mem0 = used_memory(c)
        j = c.submit(c.write_file("million.yaml", harness.noop_spec("bench-million", a.trials)))
        t_last, cpu_last, done_last = time.monotonic(), harness.proc_cpu_s(pid), 0
        deadline = t_last + a.timeout
        mark = a.every
        while True:
            job = c.job(j)
            done = int(job.get("succeeded") or 0) + int(job.get("failed") or 0)
            if done >= mark or job.get("state") == "finished":
                now, cpu = time.monotonic(), harness.proc_cpu_s(pid)
                n = done - done_last
                if n > 0:
                    rows.append((done, n / (now - t_last), (cpu - cpu_last) / n * 1e6,
                                 harness.rss_kib(pid) / 1024.0))
                    print("  %8d trials: %7.0f trials/s, coordinator %5.1f us/trial, RSS %6.1f MiB"
                          % rows[-1], flush=True)
                t_last, cpu_last, done_last = now, cpu, done
                while mark <= done:
                    mark += a.every
            if job.get("state") == "finished":
                break
            if time.monotonic() > deadline:
                raise AssertionError("the job did not finish in %gs (%d of %d done)"
                                     % (a.timeout, done, a.trials))
            c.check_daemons()
            time.sleep(0.05)
        succeeded = int(c.job(j).get("succeeded") or 0)
        per_trial = (used_memory(c) - mem0) / max(1, succeeded)
        run.ok = succeeded == a.trials
        if not run.ok:
            print("bench/million.py: %d of %d trials succeeded" % (succeeded, a.trials),
                  file=sys.stderr)
    ok = run.ok
    if not ok or len(rows) < 2:
        return 1
    first, last = rows[0], rows[-1]
    print("a job of %d no-op trials (%s): coordinator RSS %.1f MiB after the first %d, "
          "%.1f MiB at the end; CPU %.1f us/trial in the first window, %.1f in the last "
          "(median %.1f); trials/s %.0f first, %.0f last; Redis %.0f B per finished trial"
          % (a.trials, harness.BIN_DIR, first[3], first[0], last[3], first[2], last[2],
             statistics.median(r[2] for r in rows), first[1], last[1], per_trial))
    return 0


if __name__ == "__main__":
    sys.exit(main())
