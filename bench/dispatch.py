#!/usr/bin/env python3
"""bench/dispatch.py: how fast cgq starts a trial (issue 13, docs/performance.md,
*Trial launch*). `make bench` runs it after bench/restart.py.

Two figures, each on a cluster of its own (a private redis-server, one
coordinator, workers, all from $CGQ_BIN_DIR, else ./build/bin):

idle dispatch   One worker with one cpu slot (default --confine: cgroup where
                usable), an idle cluster. --trials times: a pause of --gap
                ms (20-40: the worker idle again, its last trial cleaned up,
                its spare trial directory remade), then a job of one trial,
                `command: [cgq-bench-stamp]` (list form: no shell),
                submitted over the control socket (one ZMTP connection kept
                open, no CLI process), and the wait for it to finish.
                cgq-bench-stamp (bench/stamp.c, static: no dynamic loader;
                --dynamic for a dynamically linked one) reads CLOCK_REALTIME
                at its entry point, its first instruction (x86-64; else in
                main), and again in main, and reports both on fd 3. Per
                trial (the ->main twins of the first and third: to main):
                  created->exec   the job hash's `created` (the coordinator's
                                  clock when it accepted the submit) to the
                                  stamp: the coordinator's hops (create the
                                  trial, persist it to Redis, send the
                                  Assign), the worker's launch path (trial
                                  directory, logs, pipes, cgroup leaf,
                                  clone/exec) and the exec of the stamp;
                  assigned->exec  the same from the trial hash's `started`
                                  (taken when the coordinator makes the
                                  Assign, before its Redis flush);
                  Popen peer      after 2-5 ms, in this Python process:
                                  time.time() just before
                                  subprocess.Popen([stamp]) (stdin /dev/null,
                                  stdout and stderr piped, cwd and env given,
                                  as a worker would) to the stamp;
                  submit->reply   the SubmitJob sent to its SubmitReply.
                All on one machine, one clock. p50/p90/p99 per --repeat run
                (after a warm-up of 10) and the median of those.

waves           --wave-workers workers x --wave-cpus slots (4 x 16 = 64), one
                job of --wave-trials (2000) trials `[cgq-bench-stamp, "1"]`
                (sleeps 1 s and reports score 0: a `sleep 1` that reports the
                objective, and when it started). overhead = (wall - ideal) /
                ideal, wall = the job's `finished - created` (coordinator
                clock), ideal = ceil(trials / slots) x 1 s: every slot busy
                from the submit to the end (the last, part-filled wave counts
                whole). Also printed: how long the first wave (one trial per
                slot) took to start, from `created` to the last stamp.

Prints each run and a table of median, min and max with the target beside
it. Asserts nothing about time.

    python3 bench/dispatch.py [--trials 200] [--repeat 3] [--gap 20,40] [--wave-runs 1]
                              [--worker-arg=--confine=pgroup] [--dynamic]
"""

import argparse
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import time

BENCH = os.path.dirname(os.path.abspath(__file__))
os.environ.setdefault("CGQ_BIN_DIR", os.path.join(BENCH, "..", "build", "bin"))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "integration"))
import harness  # noqa: E402

ONE_TRIAL = '''name: bench-dispatch
space:
  x: {grid: [1]}
objective: {metric: score, mode: max}
trial:
  command: [%s]
  resources: {cpu: 1}
'''

WAVES = '''name: bench-waves
space:
  i: {grid: [%s]}
objective: {metric: score, mode: max}
trial:
  command: [%s, "1"]
  resources: {cpu: 1}
'''


def pct(values, p):
    """The p-th percentile, nearest rank."""
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(p / 100.0 * len(v)) - 1))]


def load():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def t_us_of(metrics_json, key="t_us"):
    i = metrics_json.find('"%s":' % key)
    if i < 0:
        raise AssertionError("the stamp trial reported no %s: %r" % (key, metrics_json))
    return int(metrics_json[i + len(key) + 3:].split(",")[0].split("}")[0])


class Submitter:
    """Submits specs over one ZMTP connection to the coordinator's control
    endpoint, as the CLI would, without starting a process per submit."""

    def __init__(self, cluster):
        host, port = cluster.control_ep[len("tcp://"):].rsplit(":", 1)
        self.peer = harness.ZmtpPeer(host, int(port))
        # One frame per write: without this, Nagle holds the second frame
        # for the first's delayed ACK (40 ms a submit).
        self.peer.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def submit(self, spec_yaml, spec_dir):
        self.peer.send([b"", harness.pb_submit(spec_yaml, "bench.yaml", spec_dir)])
        frames = self.peer.recv()
        body = frames[-1]
        # Envelope{31: SubmitReply{1: job}}: find field 31 and its field 1.
        i = body.find(b"\xfa\x01")  # field 31, wire type 2
        if i < 0:
            raise AssertionError("submit refused: %r" % body)
        reply = body[i + 3:i + 3 + body[i + 2]]
        if not reply or reply[0] != 0x08:
            raise AssertionError("submit reply without a job id: %r" % body)
        job, shift = 0, 0
        for b in reply[1:]:
            job |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        return job

    def close(self):
        self.peer.close(linger=0)


def run_idle(a, stamp, rng):
    """One cluster; a.repeat runs of a.trials single-trial jobs."""
    runs = []  # per run: dict name -> list of ms
    with harness.BenchCluster("bench/dispatch.py", "cgq-bench-dispatch-", a.keep) as run:
        c = run.c
        c.start_redis()
        c.start_coordinator(extra=("--log-level", "warn"), heartbeat="1s")
        c.start_worker("w1", cpus=1, extra=("--log-level", "warn") + tuple(a.worker_arg))
        sub = Submitter(c)
        spec = ONE_TRIAL % stamp
        peer_dir = os.path.join(run.tmp, "peer")
        os.makedirs(peer_dir)
        env = dict(os.environ)
        env.pop("CGQ_REPORT_FD", None)
        for r in range(a.repeat + 1):  # run 0: warm-up, not counted
            n = a.trials if r else 10
            created, assigned, peer, c_main, p_main, replied = [], [], [], [], [], []
            for _ in range(n):
                time.sleep(rng.uniform(*a.gap) / 1000)
                t_sub = time.time()
                j = sub.submit(spec, c.specdir)
                replied.append((time.time() - t_sub) * 1000)

                def done():
                    h = c.job(j)
                    return h if h.get("state") == "finished" else None
                h = c.wait_for(done, 30, "job %d to finish" % j, interval=0.002)
                t = c.trial(j, 0)
                if t.get("state") != "succeeded":
                    raise AssertionError("job %d trial 0: %s" % (j, t))
                t_exec = t_us_of(t["metrics"]) / 1e6
                created.append((t_exec - float(h["created"])) * 1000)
                c_main.append((t_us_of(t["metrics"], "t_main_us") / 1e6
                               - float(h["created"])) * 1000)
                assigned.append((t_exec - float(t["started"])) * 1000)
                time.sleep(rng.uniform(0.002, 0.005))
                t0 = time.time()
                p = subprocess.Popen([stamp], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, cwd=peer_dir, env=env)
                out = p.communicate()[0].decode()
                peer.append((t_us_of(out) / 1e6 - t0) * 1000)
                p_main.append((t_us_of(out, "t_main_us") / 1e6 - t0) * 1000)
            if r == 0:
                continue
            runs.append({"created->exec": created, "assigned->exec": assigned,
                         "Popen peer": peer, "created->main": c_main,
                         "Popen peer ->main": p_main, "submit->reply": replied})
            print("  idle run %d (%d trials, load %s): created->exec p50 %.2f p90 %.2f p99 %.2f"
                  " ms | assigned->exec p50 %.2f | Popen p50 %.2f p99 %.2f ms"
                  " | ->main p50 %.2f, Popen %.2f"
                  % (r, n, load(), pct(created, 50), pct(created, 90), pct(created, 99),
                     pct(assigned, 50), pct(peer, 50), pct(peer, 99), pct(c_main, 50),
                     pct(p_main, 50)), flush=True)
        sub.close()
        run.ok = True
    ok = run.ok
    return runs if ok else None


def run_waves(a):
    """One cluster per run; returns [(overhead %, wall s, ideal s)]."""
    out = []
    slots = a.wave_workers * a.wave_cpus
    ideal = math.ceil(a.wave_trials / slots) * 1.0
    for r in range(a.wave_runs):
        with harness.BenchCluster("bench/dispatch.py", "cgq-bench-waves-", a.keep) as run:
            c = run.c
            c.start_redis()
            c.start_coordinator(extra=("--log-level", "warn"), heartbeat="1s")
            for w in range(a.wave_workers):
                c.start_worker("w%d" % (w + 1), cpus=a.wave_cpus,
                               extra=("--log-level", "warn") + tuple(a.worker_arg))
            load0 = load()
            spec = c.write_file("waves.yaml", WAVES % (", ".join(
                str(i) for i in range(a.wave_trials)), a.stamp))
            sub = Submitter(c)
            with open(spec) as f:
                j = sub.submit(f.read(), c.specdir)
            sub.close()
            h = c.wait_job(j, timeout=ideal * 3 + 30)
            if h.get("succeeded") != str(a.wave_trials):
                raise AssertionError("job %d: %s of %d trials succeeded"
                                     % (j, h.get("succeeded"), a.wave_trials))
            wall = float(h["finished"]) - float(h["created"])
            # The first wave: from the job's creation until the last of the
            # first `slots` trials ran its first instruction (its stamp).
            starts = sorted(t_us_of(t["metrics"]) / 1e6 for t in c.trials(j).values())
            first = (starts[min(slots, len(starts)) - 1] - float(h["created"])) * 1000
            out.append(((wall - ideal) / ideal * 100, wall, ideal, first))
            print("  waves run %d: %d trials over %d slots: wall %.3f s, ideal %.0f s, overhead"
                  " %.2f %%; first wave started in %.1f ms (load %s -> %s)"
                  % (r + 1, a.wave_trials, slots, wall, ideal, out[-1][0], first, load0,
                     load()), flush=True)
            run.ok = True
        ok = run.ok
        if not ok:
            return None
    return out


def row(name, values, target=""):
    print("  %-34s %9.2f %9.2f %9.2f   %s" % (name, statistics.median(values), min(values),
                                             max(values), target))


def main():
    ap = argparse.ArgumentParser(description="trial launch: idle dispatch latency and the "
                                 "bookkeeping overhead of waves of sleep 1")
    ap.add_argument("--trials", type=int, default=200, help="idle trials per run (200)")
    ap.add_argument("--repeat", type=int, default=3, help="idle runs (3), after a warm-up of 10")
    ap.add_argument("--gap", default="20,40", help="ms between a trial's end and the next "
                    "start, drawn uniformly from this range (20,40: the worker idle again, "
                    "its last trial cleaned up and a spare directory remade)")
    ap.add_argument("--wave-runs", type=int, default=1, help="waves runs (1; 0: none); each "
                    "takes about ideal + 5 s")
    ap.add_argument("--wave-trials", type=int, default=2000, help="sleep 1 trials (2000)")
    ap.add_argument("--wave-workers", type=int, default=4, help="workers (4)")
    ap.add_argument("--wave-cpus", type=int, default=16, help="slots per worker (16)")
    ap.add_argument("--worker-arg", action="append", default=[],
                    help="one more argument for every cgq-worker (repeatable), e.g. "
                    "--worker-arg=--confine=pgroup")
    ap.add_argument("--dynamic", action="store_true", help="a dynamically linked stamp "
                    "(cgq-bench-stamp-dyn): the intervals then include the dynamic loader")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    a = ap.parse_args()
    try:
        a.gap = tuple(float(x) for x in a.gap.split(","))
        assert len(a.gap) == 2 and 0 <= a.gap[0] <= a.gap[1]
    except (ValueError, AssertionError):
        ap.error("--gap: give it as MIN,MAX in ms, e.g. 20,40")
    stamp_name = "cgq-bench-stamp-dyn" if a.dynamic else "cgq-bench-stamp"
    harness.require_bins("bench/dispatch.py", ("cgq-coordinator", "cgq-worker", stamp_name))
    stamp = a.stamp = os.path.abspath(os.path.join(harness.BIN_DIR, stamp_name))
    rng = random.Random(1)
    idle = run_idle(a, stamp, rng) if a.repeat > 0 else []
    if idle is None:
        return 1
    waves = run_waves(a) if a.wave_runs > 0 else []
    if waves is None:
        return 1
    print("trial launch (%s, load %s): median, min, max over runs" % (harness.BIN_DIR, load()))
    print("  %-34s %9s %9s %9s   %s" % ("figure", "median", "min", "max", "target"))
    targets = {("created->exec", 50): "<= 1 ms", ("created->exec", 99): "<= 3 ms"}
    for name in ("created->exec", "assigned->exec", "Popen peer", "created->main",
                 "Popen peer ->main", "submit->reply"):
        for p in (50, 90, 99):
            if idle:
                row("%s p%d ms" % (name, p), [pct(r[name], p) for r in idle],
                    targets.get((name, p), ""))
    if waves:
        row("waves overhead %", [w[0] for w in waves], "<= 1 %")
        row("waves wall s (ideal %.0f)" % waves[0][2], [w[1] for w in waves])
        row("waves first wave started, ms", [w[3] for w in waves])
    return 0


if __name__ == "__main__":
    sys.exit(main())
