#!/usr/bin/env python3
"""bench/checkpoint.py: what a checkpoint costs (docs/performance.md,
*Checkpoints*).

For each store (a directory, and an HTTP store: tests/support/http_store.py
run as its own process on a loopback port), --runs times:

  seal      a trial writes --size-mb MB into $CGQ_CHECKPOINT_DIR and
            announces it; timed from the announcement (the trial writes the
            time just before it) to the coordinator's record (the record's
            `at`): the worker's rename or copy, sha256 of every byte, fsyncs
            (directory) or PUTs (HTTP), the Checkpoint message and the record.
            MB/s of that against the same file copied by `cp` (and `sync` of
            it: the seal fsyncs) into the same file system, or sent by
            `curl -T` to the same HTTP store.
  resume    the trial's worker killed (-9) once its checkpoint is recorded,
            another worker idle beside it: from the kill to the first report
            of the resumed attempt in Redis (the coordinator finding the node
            gone — heartbeats, --heartbeat —, the Assign, the restore with
            every sha256 checked, the trial's start and first report).

Prints per store and figure the median over the runs with min and max.
Asserts nothing about time. Run it on an idle machine, a Release build
(CGQ_BIN_DIR, else ./build/bin; a Debug build's sanitizers slow the sha256).

    python3 bench/checkpoint.py [--size-mb 100] [--runs 5] [--stores dir,http]
                                [--heartbeat 200ms] [--keep]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("CGQ_BIN_DIR", os.path.join(BENCH, "..", "build", "bin"))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "integration"))
import harness  # noqa: E402

CLIENTS = os.path.join(BENCH, "..", "clients", "python")
STORE_PY = os.path.join(BENCH, "..", "tests", "support", "http_store.py")

TRIAL = r'''
import os, sys, time
sys.path.insert(0, sys.argv[1])
import cgq
size_mb, mark, wait = int(sys.argv[2]), sys.argv[3], sys.argv[4] == "wait"
attempt = int(os.environ["CGQ_ATTEMPT"])
ck = cgq.checkpoint_dir()
if cgq.resume_step() is None:
    chunk = os.urandom(1 << 20)
    with open(os.path.join(ck, "blob.bin"), "wb") as f:
        for _ in range(size_mb):
            f.write(chunk)
    with open(mark, "w") as f:
        f.write(repr(time.time()))
    cgq.checkpoint(epoch=1)
    while wait:  # until the worker is killed
        time.sleep(0.05)
cgq.report(epoch=2, attempt=attempt)
cgq.result(loss=0.0, attempt=attempt)
'''

SPEC = '''name: bench-ckpt-%(name)s
space:
  x: {grid: [1]}
search: {algorithm: grid}
objective: {metric: loss, mode: min}
trial:
  command: python3 {spec_dir}/trial.py %(clients)s %(size)d %(mark)s %(mode)s
  resources: {cpu: 1}
  timeout: 10m
checkpoint: {store: '%(store)s', keep: 1}
'''


def summary(v):
    return "median %8.1f  (min %.1f, max %.1f)" % (statistics.median(v), min(v), max(v))


def timed(argv):
    t0 = time.monotonic()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description="checkpoint seal throughput and resume latency")
    ap.add_argument("--size-mb", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--stores", default="dir,http")
    ap.add_argument("--heartbeat", default="200ms", help="the coordinator's --heartbeat")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args()
    stores = a.stores.split(",")
    harness.require_bins("bench/checkpoint.py", ("cgq", "cgq-coordinator", "cgq-worker"))
    if "http" in stores and not shutil.which("curl"):
        print("bench/checkpoint.py: curl is not installed (apt-get install curl)",
              file=sys.stderr)
        return 2
    seal = {s: [] for s in stores}
    base = {s: [] for s in stores}
    resume = {s: [] for s in stores}
    http = None
    with harness.BenchCluster("bench/checkpoint.py", "cgq-bench-ckpt-", a.keep) as run:
        c = run.c
        c.start_redis()
        c.start_coordinator(extra=("--log-level", "warn"), heartbeat=a.heartbeat)
        c.write_file("trial.py", TRIAL)
        src = os.path.join(c.tmp, "src.bin")
        with open(src, "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(a.size_mb):
                f.write(chunk)
        if "http" in stores:
            http = subprocess.Popen([sys.executable, STORE_PY, "--dir",
                                     os.path.join(c.tmp, "http-store")],
                                    stdout=subprocess.PIPE, text=True)
            url = http.stdout.readline().strip()
        n = 0
        # One idle worker at a time: the seal runs on it; the resume kills it
        # and the one started beside it takes over.
        cur = "w0"
        c.start_worker(cur, cpus=1, extra=("--log-level", "warn"))
        try:
            for r in range(a.runs):
                for s in stores:
                    n += 1
                    store = os.path.join(c.specdir, "store") if s == "dir" else url + "/ck"
                    # seal: the trial ends after its checkpoint
                    mark = os.path.join(c.tmp, "mark-%d" % n)
                    j = c.submit(c.write_file("b%d.yaml" % n, SPEC % dict(
                        name=n, clients=CLIENTS, size=a.size_mb, mark=mark, mode="end",
                        store=store)))
                    job = c.wait_job(j, 600)
                    assert job.get("state") == "finished", job
                    rec = json.loads(c.trial(j, 0)["checkpoint"])
                    with open(mark) as f:
                        t_ann = float(f.read())
                    seal[s].append(a.size_mb / (rec["at"] - t_ann))
                    # the same bytes by cp + sync, or curl -T
                    if s == "dir":
                        dst = os.path.join(c.specdir, "cp-%d.bin" % n)
                        sec = timed(["cp", src, dst]) + timed(["sync", dst])
                        os.unlink(dst)
                    else:
                        sec = timed(["curl", "-sS", "-f", "-T", src, "%s/curl-%d.bin" % (url, n)])
                    base[s].append(a.size_mb / sec)
                    # resume: killed once recorded, the other worker takes it
                    n += 1
                    mark = os.path.join(c.tmp, "mark-%d" % n)
                    j = c.submit(c.write_file("b%d.yaml" % n, SPEC % dict(
                        name=n, clients=CLIENTS, size=a.size_mb, mark=mark, mode="wait",
                        store=store)))
                    c.wait_for(lambda: c.trial(j, 0).get("checkpoint"), 600, "a checkpoint")
                    nxt = "w%d" % n
                    c.start_worker(nxt, cpus=1, extra=("--log-level", "warn"))
                    t_kill = time.time()
                    c.workers[cur].kill9()
                    cur = nxt
                    key = "cgq:job:{%d}:reports:0" % j

                    def resumed():
                        for eid, f in c.redis.cmd("XRANGE", key, "-", "+") or []:
                            e = dict(zip(f[0::2], f[1::2]))
                            if json.loads(e.get("r", "{}")).get("attempt") == 2:
                                return int(eid.split("-")[0]) / 1000.0
                        return None
                    t_first = c.wait_for(resumed, 600, "the resumed attempt's report",
                                         interval=0.01)
                    resume[s].append((t_first - t_kill) * 1000)
                    c.wait_job(j, 600)
                    print("  run %d %-4s: seal %7.1f MB/s (%s %7.1f MB/s), resume %7.1f ms"
                          % (r + 1, s, seal[s][-1], "cp+sync" if s == "dir" else "curl -T",
                             base[s][-1], resume[s][-1]), flush=True)
            run.ok = True
        finally:
            if http:
                http.terminate()
                http.wait(10)
    if not run.ok:
        return 1
    print("checkpoints of %d MB, %d runs, --heartbeat %s, %s:"
          % (a.size_mb, a.runs, a.heartbeat, harness.BIN_DIR))
    for s in stores:
        print("  %-4s seal             MB/s %s" % (s, summary(seal[s])))
        print("  %-4s %-16s MB/s %s" % (s, "cp + sync" if s == "dir" else "curl -T",
                                         summary(base[s])))
        print("  %-4s kill -> resumed  ms   %s" % (s, summary(resume[s])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
