#!/usr/bin/env python3
"""bench/nodes.py: what many idle nodes cost the coordinator (issue 13's
target: 2,000 nodes with 1 Hz heartbeats under 10 % of one core).

Per node count (--nodes, default 2000): a private redis-server and one
coordinator (--heartbeat 1s), from $CGQ_BIN_DIR (else ./build/bin), and one
cgq-simnodes process with that many DEALER sockets (bench/simnodes.c: each a
node with its own id that says Hello and then heartbeats once a second, the
nodes' phases spread evenly over the second). Once every node is welcomed
and heartbeating, --windows windows of --window seconds each measure:

  coord CPU %    the coordinator's user+system time over the window, all its
                 threads (main: the main thread alone; the rest is ZeroMQ's
                 I/O thread), as % of one core (/proc/PID/stat, task/*/stat)
  us/heartbeat   that CPU time over the heartbeats sent in the window
                 (nodes x window / interval)
  redis cmd/hb   Redis commands over the window (INFO commandstats, every
                 command the coordinator sent, MULTI and EXEC included; the
                 bench's own INFO left out) per heartbeat
  redis CPU %    redis-server's user+system time, % of one core
  RSS/node       coordinator VmRSS after the windows minus before the nodes
                 came, over the node count

Then a job of --trials noop trials (cpu: 1; each node offers --cpus slots)
runs across the simulated nodes: its time from created to finished (the
coordinator's clock). Finally it checks that every node was alive in
cgq:node:ID throughout (state alive, last_seen recent) and prints
median/min/max over the windows next to the target. Asserts nothing about
time; exits 1 only when something did not work (a node lost, the job not
finished).

    python3 bench/nodes.py [--nodes 2000] [--windows 4] [--window 5] [--trials 2000]
    python3 bench/nodes.py --nodes 500,2000,4000
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("CGQ_BIN_DIR", os.path.join(BENCH, "..", "build", "bin"))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "integration"))
import harness  # noqa: E402

TARGET_PCT = 10.0  # at 2,000 nodes

def proc_cpu(pid):
    """(all threads, main thread) CPU seconds of pid."""
    return harness.proc_cpu_s(pid), harness.proc_cpu_s(pid, pid)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def redis_calls(r):
    """Commands Redis has run, less the bench's own INFO."""
    total = 0
    for k, v in r.info("commandstats").items():
        if k.startswith("cmdstat_") and k != "cmdstat_info":
            total += int(v.split(",", 1)[0].split("=", 1)[1])
    return total


def alive_count(c, prefix, n):
    ids = ["%s%05d" % (prefix, i) for i in range(n)]
    now = time.time()
    alive = 0
    for i in range(0, n, 500):
        reps = c.redis.pipeline([("HMGET", "cgq:node:" + x, "state", "last_seen")
                                 for x in ids[i:i + 500]])
        for state, seen in reps:
            if state == "alive" and seen and now - float(seen) < 10:
                alive += 1
    return alive


def run_one(a, n, tmp):
    """One node count; returns a dict of lists / figures."""
    c = harness.Cluster(tmp)
    prefix = "sim-"
    out = {"nodes": n, "cpu": [], "main": [], "us_hb": [], "cmd_hb": [], "redis": [],
           "problems": []}
    sim = None
    try:
        c.start_redis()
        c.start_coordinator(extra=("--log-level", "warn"), heartbeat="1s")
        coord = c.coordinator.pid
        rpid = c.redis_proc.pid
        time.sleep(0.5)
        rss0 = harness.rss_kib(coord)
        duration = 60 + a.windows * a.window + 120
        t0 = time.monotonic()
        sim = harness.Proc("simnodes-%d" % n,
                           [os.path.join(harness.BIN_DIR, "cgq-simnodes"), "--coordinator",
                            c.nodes_ep, "--nodes", str(n), "--cpus", str(a.cpus),
                            "--duration", str(duration), "--prefix", prefix],
                           c.logdir, capture_stdout=True)
        c.procs.append(sim)
        line = sim.wait_first_line(60)
        if not line or "welcomed" not in line:
            raise AssertionError("cgq-simnodes did not welcome its %d nodes within 60 s: %r"
                                 % (n, line))
        out["join_s"] = time.monotonic() - t0
        # The heartbeats start an interval after the last Welcome; let one
        # round pass and the Hellos' Redis writes settle.
        time.sleep(2.5)
        prev = None
        for w in range(a.windows + 1):
            cur = (time.monotonic(), proc_cpu(coord), harness.proc_cpu_s(rpid),
                   redis_calls(c.redis))
            if prev is not None:
                dt = cur[0] - prev[0]
                hbs = n * dt / 1.0
                cpu = cur[1][0] - prev[1][0]
                out["cpu"].append(100 * cpu / dt)
                out["main"].append(100 * (cur[1][1] - prev[1][1]) / dt)
                out["us_hb"].append(1e6 * cpu / hbs)
                out["cmd_hb"].append((cur[3] - prev[3]) / hbs)
                out["redis"].append(100 * (cur[2] - prev[2]) / dt)
            prev = cur
            if w < a.windows:
                time.sleep(a.window)
        out["rss_mb"] = harness.rss_kib(coord) / 1024
        out["rss_node_kb"] = (harness.rss_kib(coord) - rss0) / n
        out["alive"] = alive_count(c, prefix, n)
        if out["alive"] != n:
            out["problems"].append("%d of %d nodes alive in Redis after the windows"
                                   % (out["alive"], n))
        if a.trials:
            spec = c.write_file("nodes.yaml", harness.noop_spec("bench-nodes", a.trials))
            t = time.monotonic()
            j = c.submit(spec)
            h = c.wait_job(j, timeout=120)
            out["job_wall_s"] = time.monotonic() - t
            out["job_s"] = float(h["finished"]) - float(h["created"])
            out["job_ok"] = int(h.get("succeeded", "0"))
            if out["job_ok"] != a.trials:
                out["problems"].append("the job ended %s with %d of %d trials succeeded"
                                       % (h.get("state"), out["job_ok"], a.trials))
            out["job_nodes"] = len(set(v for v in (c.redis.pipeline(
                [("HGET", "cgq:job:{%d}:trial:%d" % (j, t), "node")
                 for t in range(1, min(a.trials, 2000) + 1)])) if v))
    finally:
        if sim is not None:
            pr = sim.stop(30)
            if pr:
                out["problems"].append(pr)
            try:
                with open(sim.out_path) as f:
                    out["sim"] = f.read().strip().splitlines()[-1]
            except (OSError, IndexError):
                pass
        out["problems"].extend(c.stop())
    return out


def fmt(v, spec="%.1f"):
    return "%s  (min %s, max %s)" % (spec % statistics.median(v), spec % min(v), spec % max(v))


def main():
    ap = argparse.ArgumentParser(description="the coordinator's cost of many idle nodes")
    ap.add_argument("--nodes", default="2000", help="node counts, comma-separated (2000)")
    ap.add_argument("--windows", type=int, default=4, help="measured windows per count (4)")
    ap.add_argument("--window", type=float, default=5, help="seconds per window (5)")
    ap.add_argument("--trials", type=int, default=2000, help="noop trials run across the "
                    "nodes after the windows (2000; 0: none)")
    ap.add_argument("--cpus", type=int, default=1, help="slots each node offers (1)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    a = ap.parse_args()
    harness.require_bins("bench/nodes.py", ("cgq", "cgq-coordinator", "cgq-simnodes"))
    counts = [int(x) for x in a.nodes.split(",") if x.strip()]
    print("idle nodes (cgq-simnodes, 1 s heartbeats, %d windows of %g s, %s), load average %s"
          % (a.windows, a.window, harness.BIN_DIR, loadavg()), flush=True)
    results, failed = [], False
    for n in counts:
        tmp = tempfile.mkdtemp(prefix="cgq-bench-nodes-")
        try:
            r = run_one(a, n, tmp)
        except (AssertionError, OSError, harness.RedisError) as e:
            r = {"nodes": n, "problems": [str(e)]}
        except KeyboardInterrupt:
            print("\nbench/nodes.py: interrupted; logs in %s" % tmp, file=sys.stderr)
            return 1
        results.append(r)
        for p in r["problems"]:
            print("bench/nodes.py: %d nodes: %s" % (n, p), file=sys.stderr)
        if r["problems"] or a.keep:
            failed |= bool(r["problems"])
            print("bench/nodes.py: logs kept in %s" % tmp, file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        if not r.get("cpu"):
            continue
        print("  %d nodes (joined in %.1f s):" % (n, r["join_s"]))
        target = "   target < %.0f %% at 2,000 nodes" % TARGET_PCT if n == 2000 else ""
        print("    coordinator CPU %%  %s%s" % (fmt(r["cpu"]), target))
        print("      main thread %%   %s" % fmt(r["main"]))
        print("    us per heartbeat  %s" % fmt(r["us_hb"], "%.2f"))
        print("    Redis cmds/hb     %s" % fmt(r["cmd_hb"], "%.3f"))
        print("    redis-server CPU %% %s" % fmt(r["redis"]))
        print("    coordinator RSS   %.1f MB, %.1f KB per node" % (r["rss_mb"], r["rss_node_kb"]))
        print("    nodes alive       %d of %d" % (r["alive"], n))
        if "job_s" in r:
            print("    noop job, %d trials over %d nodes: %.3f s created->finished "
                  "(%.2f s with cgq submit)" % (r["job_ok"], r["job_nodes"], r["job_s"],
                                               r["job_wall_s"]))
        if r.get("sim"):
            print("    %s" % r["sim"])
    print("load average at the end %s" % loadavg())
    if any(r.get("cpu") for r in results):
        print("\n| nodes | coordinator CPU % median | min | max | main thread % | us/heartbeat "
              "| Redis cmds/hb | redis-server CPU % | RSS KB/node | target |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in results:
            if not r.get("cpu"):
                continue
            print("| %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.3f | %.1f | %.1f | %s |"
                  % (r["nodes"], statistics.median(r["cpu"]), min(r["cpu"]), max(r["cpu"]),
                     statistics.median(r["main"]), statistics.median(r["us_hb"]),
                     statistics.median(r["cmd_hb"]), statistics.median(r["redis"]),
                     r["rss_node_kb"], "< %.0f %%" % TARGET_PCT if r["nodes"] == 2000 else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
