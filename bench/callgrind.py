#!/usr/bin/env python3
"""bench/callgrind.py: the coordinator's instructions per no-op trial, exactly
(docs/performance.md, Per-trial cost). CPU time per trial moves with the
machine's load; an instruction count does not.

Runs `bench/run --no-peer --cmd 0 --repeat 1` twice, with --noop SMALL and
--noop LARGE, each time with the coordinator under `valgrind --tool=callgrind`
(a wrapper `cgq-coordinator` in a temporary CGQ_BIN_DIR; the CLI and workers
run natively). A bench run makes 1000 warm-up + 2 x N trials (end to end and
drain-only), so the difference of the two totals over 2 x (LARGE - SMALL)
trials is the cost per trial with the start-up and the fixed costs taken out.
Prints both totals and the per-trial figure. Asserts nothing. Needs valgrind.

    python3 bench/callgrind.py [--bin-dir build/bin] [--small 1000] [--large 3000]
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

BENCH = os.path.dirname(os.path.abspath(__file__))


def total_ir(path):
    """The 'totals:' (or 'summary:') line of a callgrind output file."""
    with open(path) as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    raise SystemExit("callgrind.py: no totals in %s" % path)


def one(bin_dir, n, tmp):
    wrap = os.path.join(tmp, "bin-%d" % n)
    os.makedirs(wrap)
    for name in os.listdir(bin_dir):
        if name != "cgq-coordinator":
            os.symlink(os.path.join(bin_dir, name), os.path.join(wrap, name))
    out = os.path.join(tmp, "cg-%d.%%p" % n)
    real = os.path.join(bin_dir, "cgq-coordinator")
    with open(os.path.join(wrap, "cgq-coordinator"), "w") as f:
        f.write('#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s %s "$@"\n'
                % (out, real))
    os.chmod(os.path.join(wrap, "cgq-coordinator"), 0o755)
    env = dict(os.environ, CGQ_BIN_DIR=wrap)
    argv = [sys.executable, os.path.join(BENCH, "run"), "--no-peer", "--noop", str(n),
            "--cmd", "0", "--repeat", "1", "--results", ""]
    r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=1200)
    files = glob.glob(os.path.join(tmp, "cg-%d.*" % n))
    if r.returncode != 0 or len(files) != 1:
        sys.stdout.write(r.stdout[-3000:])
        raise SystemExit("callgrind.py: the run with --noop %d failed (rc %d, %d profiles)"
                         % (n, r.returncode, len(files)))
    return total_ir(files[0]), 1000 + 2 * n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", default=os.environ.get("CGQ_BIN_DIR", "build/bin"))
    ap.add_argument("--small", type=int, default=1000)
    ap.add_argument("--large", type=int, default=3000)
    ap.add_argument("--keep", action="store_true", help="keep the profiles (path printed)")
    a = ap.parse_args()
    if not shutil.which("valgrind"):
        raise SystemExit("callgrind.py: valgrind is not installed (apt-get install valgrind)")
    bin_dir = os.path.abspath(a.bin_dir)
    tmp = tempfile.mkdtemp(prefix="cgq-callgrind-")
    try:
        ir1, n1 = one(bin_dir, a.small, tmp)
        ir2, n2 = one(bin_dir, a.large, tmp)
        print("coordinator under callgrind, %s:" % bin_dir)
        print("  %6d trials: %13d instructions" % (n1, ir1))
        print("  %6d trials: %13d instructions" % (n2, ir2))
        print("  per no-op trial: %.0f instructions" % ((ir2 - ir1) / (n2 - n1)))
        if a.keep:
            print("  profiles in %s (callgrind_annotate FILE)" % tmp)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
