#!/usr/bin/env python3
"""bench/curve.py: what CURVE costs in trials/s (docs/security.md).

The same cluster as `make bench` (a private redis-server, one coordinator,
--workers workers of --cpus slots, all on loopback), run with CURVE off and
on, alternately, --repeat times each: a noop job (the coordinator's and the
wire's cost per trial, nothing spawned) and a /bin/true job (a process per
trial). Figures are the coordinator-side trials/s of bench/run: trials /
(job finished - job created), the median of the runs. Binaries come from
$CGQ_BIN_DIR, else ./build/bin (build with `make build` first; a sanitizer
build measures the sanitizer).

    python3 bench/curve.py [--noop 20000] [--cmd 2000] [--repeat 3]
"""

import argparse
import importlib.machinery
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(BENCH, "..", "tests", "integration"))
import harness  # noqa: E402


def load_bench_run():
    loader = importlib.machinery.SourceFileLoader("bench_run", os.path.join(BENCH, "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def keygen(tmp, name):
    d = os.path.join(tmp, "keys")
    subprocess.run([harness.binary("cgq"), "keygen", name, "--dir", d], check=True,
                   capture_output=True, timeout=30)
    return os.path.join(d, name + ".key"), os.path.join(d, name + ".key_secret")


def run_cluster(br, tmp, curve, a):
    """One cluster, CURVE on or off; returns {kind: [coordinator-side trials/s]}."""
    c = harness.Cluster(tmp)
    coord_extra, worker_extra = ["--log-level", "warn"], ["--log-level", "warn"]
    saved = {k: os.environ.get(k) for k in ("CGQ_CURVE_SECRET", "CGQ_CURVE_SERVER")}
    if curve:
        cpub, csec = keygen(tmp, "coordinator")
        wpub, wsec = keygen(tmp, "worker")
        upub, usec = keygen(tmp, "user")
        allow = os.path.join(tmp, "allow")
        os.makedirs(allow)
        for pub in (wpub, upub):
            shutil.copy(pub, allow)
        coord_extra += ["--curve-secret", csec, "--curve-allow", allow]
        worker_extra += ["--curve-secret", wsec, "--curve-server", cpub]
        os.environ.update(CGQ_CURVE_SECRET=usec, CGQ_CURVE_SERVER=cpub)  # the CLI's submit
    out = {}
    try:
        c.start_redis()
        c.start_coordinator(extra=coord_extra, heartbeat="1s")
        for i in range(a.workers):
            c.start_worker("bench%d" % (i + 1), cpus=a.cpus, extra=worker_extra,
                           kill_grace="5s")
        for kind, n in (("noop", a.noop), ("true", a.cmd)):
            if n <= 0:
                continue
            br.one_run(c, kind, min(n, 500), 1, a.timeout)  # warm-up, not counted
            r = br.one_run(c, kind, n, 1, a.timeout)
            if not r["done"]:
                raise RuntimeError("%s job of %d trials did not finish" % (kind, n))
            out[kind] = r.get("coord_tps", r["tps"])
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        problems = c.stop()
        if problems:
            print("bench: " + "; ".join(problems), file=sys.stderr)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--noop", type=int, default=20000, help="trials of the noop job (20000)")
    ap.add_argument("--cmd", type=int, default=2000, help="trials of the /bin/true job (2000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each setting (3)")
    ap.add_argument("--workers", type=int, default=2, help="workers (2)")
    ap.add_argument("--cpus", type=int, default=64, help="slots per worker (64)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per job (600)")
    a = ap.parse_args()
    if "CGQ_BIN_DIR" not in os.environ:
        harness.BIN_DIR = os.path.abspath(os.path.join(BENCH, "..", "build", "bin"))
    br = load_bench_run()
    figures = {(k, on): [] for k in ("noop", "true") for on in (False, True)}
    for i in range(a.repeat):
        for on in (False, True):
            tmp = tempfile.mkdtemp(prefix="cgq-bench-curve-")
            try:
                for kind, tps in run_cluster(br, tmp, on, a).items():
                    figures[(kind, on)].append(tps)
                    print("  run %d  %-5s CURVE %-3s %9.1f trials/s" % (
                        i + 1, kind, "on" if on else "off", tps), flush=True)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    print("\nCURVE overhead, coordinator-side trials/s (median of %d; %d workers x %d slots, "
          "binaries %s)" % (a.repeat, a.workers, a.cpus, harness.BIN_DIR))
    print("%-16s %12s %12s %10s" % ("job", "CURVE off", "CURVE on", "change"))
    for kind, n in (("noop", a.noop), ("true", a.cmd)):
        off, on = figures[(kind, False)], figures[(kind, True)]
        if not off or not on:
            continue
        m_off, m_on = statistics.median(off), statistics.median(on)
        print("%-16s %12.1f %12.1f %+9.1f%%" % ("%s x %d" % (kind, n), m_off, m_on,
                                                100.0 * (m_on - m_off) / m_off))


if __name__ == "__main__":
    main()
