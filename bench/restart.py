#!/usr/bin/env python3
"""bench/restart.py: coordinator kill -9 -> restart -> first dispatch, in ms
(docs/operations.md, Figures). `make bench` runs it after bench/run.

A private redis-server (AOF on, appendfsync everysec, as `cgq run` and the
compose file use), one coordinator on fixed loopback ports, one worker with
--cpus slots, all from $CGQ_BIN_DIR (else ./build/bin), and a job of short
trials (`sleep 0.2`, cpu: 1) that keeps every slot busy. Then --repeat
times: the coordinator is killed with SIGKILL mid-job and started again at
once on the same ports; the worker keeps running its trials and holds their
results. Measured from the kill:

  ready           the new coordinator printed its ready line (lease taken:
                  the old holder's PID is gone, so at once; jobs reloaded;
                  endpoints bound);
  first dispatch  the first `trial.running` event of a trial the new
                  coordinator assigned (its epoch in the trial's `assign`
                  field; the old one's last batch may land after the kill),
                  from the kill: the worker
                  heard the new coordinator (its next heartbeat is answered
                  `unknown`, so it says Hello at once), its tasks were
                  adopted, its results applied, and a freed slot got a new
                  trial. With --heartbeat H it is about ready + up to H
                  (the kills land at random phases of the heartbeat).

Prints each run and the median, min and max. Asserts nothing about time.

    python3 bench/restart.py [--repeat 9] [--heartbeat 1s] [--cpus 4]
"""

import argparse
import os
import random
import re
import statistics
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("CGQ_BIN_DIR", os.path.join(BENCH, "..", "build", "bin"))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "integration"))
import harness  # noqa: E402

SPEC = '''name: bench-restart
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, samples: 100000}
objective: {metric: score, mode: max}
trial:
  command: "sleep 0.2; echo '{{\\"score\\": 1}}' >&3"
  resources: {cpu: 1}
'''


def ms_of(entry_id):
    return int(entry_id.split("-")[0])


def main():
    ap = argparse.ArgumentParser(description="coordinator kill -9 -> restart -> first dispatch")
    ap.add_argument("--repeat", type=int, default=9, help="kills measured (9)")
    ap.add_argument("--heartbeat", default="1s", help="the coordinator's --heartbeat (1s, the "
                    "default a cluster runs with)")
    ap.add_argument("--cpus", type=int, default=4, help="the worker's slots (4)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args()
    harness.require_bins("bench/restart.py", ("cgq", "cgq-coordinator", "cgq-worker"))
    rng = random.Random(1)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s)", a.heartbeat)
    if not m:
        ap.error("--heartbeat: give it as 1s or 200ms")
    hb_s = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    ready, dispatch = [], []
    with harness.BenchCluster("bench/restart.py", "cgq-bench-restart-", a.keep) as run:
        c = run.c
        c.start_redis(appendonly=True)
        c.redis.cmd("CONFIG", "SET", "appendfsync", "everysec")
        ports = (harness.free_port(), harness.free_port())
        eps = ("--bind", "tcp://127.0.0.1:%d" % ports[0],
               "--control", "tcp://127.0.0.1:%d" % ports[1], "--log-level", "warn")
        c.start_coordinator(extra=eps, heartbeat=a.heartbeat)
        c.start_worker("w1", cpus=a.cpus, extra=("--log-level", "warn"))
        j = c.submit(c.write_file("restart.yaml", SPEC))
        c.wait_for(lambda: int(c.job(j).get("succeeded", "0")) >= 2 * a.cpus, 60,
                   "the job to run")
        for r in range(a.repeat):
            # Slots busy, results coming in; the kill lands at a random phase
            # of the worker's heartbeat (else every run would wait a whole one).
            time.sleep(1.0 + rng.uniform(0, hb_s))
            t_kill = time.time()
            c.coordinator.kill9()
            c.start_coordinator(extra=eps, heartbeat=a.heartbeat)
            t_ready = time.time()

            epoch = c.redis.cmd("GET", "cgq:seq:epoch")

            def first():
                # The old coordinator's last batch may land just after the
                # kill: a trial counts only if the new epoch assigned it
                # (its hash's assign field is EPOCH:SEQ:INSTANCE).
                ev = c.redis.cmd("XRANGE", "cgq:events", "%d" % int(t_kill * 1000 - 1000), "+",
                                 "COUNT", "4000") or []
                for i, f in ev:
                    e = dict(zip(f[0::2], f[1::2]))
                    if e.get("type") != "trial.running":
                        continue
                    for t in e.get("trials", "").split():
                        key = "cgq:job:{%s}:trial:%s" % (e.get("job"), t.split(":")[0])
                        assign = c.redis.cmd("HGET", key, "assign") or ""
                        if assign.split(":")[0] == epoch:
                            return ms_of(i)
                return None
            c.wait_for(first, 60, "a dispatch after restart %d" % (r + 1), interval=0.01)
            ms = first() - t_kill * 1000
            ready.append((t_ready - t_kill) * 1000)
            dispatch.append(ms)
            print("  restart %d: ready %7.1f ms, first dispatch %7.1f ms after the kill"
                  % (r + 1, ready[-1], ms), flush=True)
        run.ok = True
    ok = run.ok
    if not ok:
        return 1
    print("coordinator kill -9 -> restart (%d runs, --heartbeat %s, %s):"
          % (a.repeat, a.heartbeat, harness.BIN_DIR))
    for name, v in (("ready", ready), ("first dispatch", dispatch)):
        print("  %-15s median %7.1f ms  (min %.1f, max %.1f)"
              % (name, statistics.median(v), min(v), max(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
