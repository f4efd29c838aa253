#!/usr/bin/env python3
"""run.py: build cgq's libFuzzer targets and fuzz each for a bounded time.

    tests/fuzz/run.py [--build-dir DIR] [--time S] [--build-only | --no-build] [TARGET...]

Builds DIR (default build-fuzz/) with clang and CGQ_FUZZ=ON, then runs each
target (default: all) for S seconds (default $FUZZ_TIME, else 60) on its seed
corpus tests/fuzz/corpus/TARGET/ plus a working corpus DIR/corpus/TARGET/ that
keeps what earlier runs found. Prints executions, coverage and crashes per
target; crash, leak and timeout inputs are kept in DIR/crashes/TARGET/. Exits 0
when no target found anything, 1 when one did, 77 when clang or its libFuzzer
runtime is not installed (scripts/bootstrap installs them), 2 on a build error.
make fuzz and ctest's fuzz_build and fuzz_run_TARGET call it.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TARGETS = ["spec", "wire", "coord", "report", "expr", "render", "runcfg"]
# Per target: the longest input libFuzzer makes. A spec gets more room than the
# default 4096 bytes, so a path quadratic in its length shows as a timeout.
MAX_LEN = {"spec": 16384, "coord": 8192}
# Per target: its libFuzzer dictionary in tests/fuzz/ (the coordinator reads
# the same Envelopes as the wire target).
DICT = {"spec": "spec.dict", "runcfg": "runcfg.dict", "expr": "expr.dict", "wire": "wire.dict", "coord": "wire.dict"}
# A parser that needs longer than this for one input has a defect (libFuzzer
# reports a timeout, which counts as a crash here).
TIMEOUT_S = 10


def have_libfuzzer(clang):
    """True when clang can link -fsanitize=fuzzer (libclang-rt-dev is there)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as f:
            f.write("#include <stddef.h>\n#include <stdint.h>\n"
                    "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)"
                    "{(void)d;(void)n;return 0;}\n")
        r = subprocess.run([clang, "-fsanitize=fuzzer", src, "-o", os.path.join(tmp, "t")],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0


def build(build_dir, jobs):
    clang = shutil.which("clang")
    if not clang or not have_libfuzzer(clang):
        print("run.py: clang with libFuzzer not found (scripts/bootstrap installs clang "
              "and libclang-rt-dev); skipping", file=sys.stderr)
        return 77
    if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")):
        r = subprocess.run(["cmake", "-S", ROOT, "-B", build_dir, "-DCMAKE_C_COMPILER=" + clang,
                            "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DCGQ_FUZZ=ON"],
                           stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            return 2
    r = subprocess.run(["cmake", "--build", build_dir, "--target", "fuzzers", "-j", str(jobs)],
                       stdout=subprocess.DEVNULL)
    return 0 if r.returncode == 0 else 2


def stat(log, name):
    m = re.search(r"stat::%s:\s*(\d+)" % name, log)
    return int(m.group(1)) if m else 0


def fuzz(build_dir, target, seconds):
    """Runs one target; returns (execs, exec/s, coverage, corpus, found files, ok)."""
    binary = os.path.join(build_dir, "bin", "fuzz_" + target)
    work = os.path.join(build_dir, "corpus", target)
    crashes = os.path.join(build_dir, "crashes", target)
    os.makedirs(work, exist_ok=True)
    os.makedirs(crashes, exist_ok=True)
    before = set(os.listdir(crashes))
    cmd = [binary, "-max_total_time=%d" % seconds, "-timeout=%d" % TIMEOUT_S,
           "-rss_limit_mb=2048", "-print_final_stats=1",
           "-artifact_prefix=" + crashes + "/"]
    if target in MAX_LEN:
        cmd.append("-max_len=%d" % MAX_LEN[target])
    if target in DICT:
        cmd.append("-dict=" + os.path.join(HERE, DICT[target]))
    cmd += [work, os.path.join(HERE, "corpus", target)]
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    log_path = os.path.join(build_dir, "fuzz_%s.log" % target)
    with open(log_path, "w") as log_file:
        # Bounded twice: libFuzzer's own clock, and ours with room for start-up.
        try:
            r = subprocess.run(cmd, stdout=log_file, stderr=subprocess.STDOUT,
                               timeout=seconds + 120, env=env)
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc = -1
    with open(log_path, errors="replace") as f:
        log = f.read()
    found = sorted(set(os.listdir(crashes)) - before)
    covs = re.findall(r"cov: (\d+)", log)
    cov = int(covs[-1]) if covs else 0
    corpus = len(os.listdir(work))
    ok = rc == 0 and not found
    if not ok:
        sys.stderr.write(log[-6000:])
        sys.stderr.write("\nrun.py: fuzz_%s exited %d; full log: %s\n" % (target, rc, log_path))
        for name in found:
            sys.stderr.write("run.py: input kept: %s\n" % os.path.join(crashes, name))
    return (stat(log, "number_of_executed_units"), stat(log, "average_exec_per_sec"), cov,
            corpus, found, ok)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build-fuzz"))
    ap.add_argument("--time", type=int, default=int(os.environ.get("FUZZ_TIME", "60")))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--build-only", action="store_true")
    g.add_argument("--no-build", action="store_true")
    ap.add_argument("targets", nargs="*", default=TARGETS)
    args = ap.parse_args()
    for t in args.targets:
        if t not in TARGETS:
            ap.error("unknown target %r (expected one of: %s)" % (t, ", ".join(TARGETS)))
    build_dir = os.path.abspath(args.build_dir)
    if args.no_build:
        if not os.path.exists(os.path.join(build_dir, "bin", "fuzz_" + args.targets[0])):
            print("run.py: %s holds no fuzz build (fuzz_build did not run); skipping"
                  % build_dir, file=sys.stderr)
            return 77
    else:
        rc = build(build_dir, args.jobs)
        if rc != 0 or args.build_only:
            return rc
    print("%-8s %10s %8s %6s %7s %s" % ("target", "execs", "exec/s", "cov", "corpus", "found"))
    bad = 0
    for t in args.targets:
        execs, rate, cov, corpus, found, ok = fuzz(build_dir, t, args.time)
        bad += not ok
        print("%-8s %10d %8d %6d %7d %d%s" % (t, execs, rate, cov, corpus, len(found),
                                             "" if ok else "  FAILED"), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
