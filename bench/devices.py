#!/usr/bin/env python3
"""bench/devices.py: what cgq-device-runner costs on this machine (stdlib only).

Prints three figures, measured in this invocation with the binaries of
--bin-dir (default ./build/bin; build cgq-device-runner and cgq-fake-device):

  overhead per timed run   the runner's p50 for `cgq-fake-device --ms 1`
                           (vfork + exec + wait4, timed inside
                           `cgq-device-runner measure`) minus the p50 of the
                           same command timed directly here (posix_spawn +
                           waitpid around time.perf_counter_ns);
  artifact cache           time to get a 16 MiB file:// artifact on a miss
                           (copy + sha256) and on a hit (lookup + touch), as
                           the runner reports them (artifact_fetch_ms);
  measurements per hour    for a 1 ms model (fake device at 1 ms, warmup 1,
                           repeats 10, the default cooldown 0): 3600 / the
                           wall time of one whole `cgq-device-runner measure`
                           (process start, runner.yaml, device check, runs,
                           statistics), i.e. the runner-side ceiling per
                           device; the coordinator's dispatch adds about one
                           loop turn (docs/performance.md).

Everything runs in a temporary directory, removed at the end. It asserts
nothing about time.
"""

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def measure(bin_dir, cfg, bench, *extra):
    argv = [os.path.join(bin_dir, "cgq-device-runner"), "measure", "--config", cfg,
            "--device", "d1", "--benchmark", bench, "--log-level", "warn"] + list(extra)
    t0 = time.perf_counter()
    out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    wall = time.perf_counter() - t0
    line = json.loads(out.stdout)
    if line["status"] != "succeeded":
        sys.exit("bench/devices.py: %s: %s" % (bench, line["error"]))
    return line["metrics"], wall


def direct_p50(fake, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        pid = os.posix_spawn(fake, [fake, "--ms", "1"], os.environ)
        os.waitpid(pid, 0)
        times.append((time.perf_counter_ns() - t0) / 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin-dir", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "bin"))
    ap.add_argument("--runs", type=int, default=300, help="timed runs per figure (default 300)")
    ap.add_argument("--measurements", type=int, default=20,
                    help="whole measurements timed for the per-hour figure (default 20)")
    a = ap.parse_args()
    bin_dir = os.path.abspath(a.bin_dir)
    fake = os.path.join(bin_dir, "cgq-fake-device")
    for b in ("cgq-device-runner", "cgq-fake-device"):
        if not os.access(os.path.join(bin_dir, b), os.X_OK):
            sys.exit("bench/devices.py: %s not built in %s (set --bin-dir)" % (b, bin_dir))
    tmp = tempfile.mkdtemp(prefix="cgq-bench-devices-")
    try:
        cfg = os.path.join(tmp, "runner.yaml")
        with open(cfg, "w") as f:
            f.write("cache: {dir: %s/cache, max_size: 1G}\n"
                    "devices: [{id: d1, tags: {device: bench}}]\n"
                    "benchmarks:\n"
                    "  one-ms:\n    command: [%s, --ms, '1']\n    warmup: 1\n    repeats: 10\n"
                    "  cat:\n    command: ['true', '{artifact}']\n    warmup: 0\n    repeats: 1\n"
                    % (tmp, fake))
        # 1. overhead per timed run, interleaved to share the machine's state
        direct, runner = [], []
        for _ in range(3):
            direct.append(direct_p50(fake, a.runs // 3))
            m, _ = measure(bin_dir, cfg, "one-ms", "--repeats", str(a.runs // 3))
            runner.append(m["p50_ms"])
        d, r = statistics.median(direct), statistics.median(runner)
        # 2. artifact cache
        blob = os.urandom(16 << 20)
        path = os.path.join(tmp, "model.bin")
        with open(path, "wb") as f:
            f.write(blob)
        sha = hashlib.sha256(blob).hexdigest()
        url = "file://" + path
        miss, _ = measure(bin_dir, cfg, "cat", "--artifact", url, "--sha256", sha)
        hits = [measure(bin_dir, cfg, "cat", "--artifact", url, "--sha256", sha)[0]
                for _ in range(5)]
        assert not miss["artifact_cached"] and all(h["artifact_cached"] for h in hits)
        hit = statistics.median(h["artifact_fetch_ms"] for h in hits)
        # 3. measurements per hour per device, 1 ms model
        walls = [measure(bin_dir, cfg, "one-ms")[1] for _ in range(a.measurements)]
        w = statistics.median(walls)
        print("cgq-device-runner figures (%s)" % bin_dir)
        print("  `cgq-fake-device --ms 1`, p50 of %d runs:" % (a.runs // 3 * 3))
        print("    timed directly (posix_spawn + waitpid):  %8.3f ms" % d)
        print("    timed by the runner (per-run timing):    %8.3f ms" % r)
        print("    runner overhead per timed run:           %8.3f ms" % (r - d))
        print("  16 MiB file:// artifact, sha256 checked:")
        print("    cache miss (copy + hash):                %8.3f ms" % miss["artifact_fetch_ms"])
        print("    cache hit (lookup + touch), p50 of 5:    %8.3f ms" % hit)
        print("  1 ms model, warmup 1 + repeats 10, one whole measurement:")
        print("    wall time, p50 of %d:                    %8.3f ms" % (len(walls), w * 1e3))
        print("    measurements per hour per device:        %8.0f" % (3600 / w))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
