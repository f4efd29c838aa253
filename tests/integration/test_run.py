#!/usr/bin/env python3
"""j. `cgq run` end to end on the quickstart example, in a temporary copy of
the working tree: exit 0, a leaderboard, nothing left running; a second run in
the same directory works too and is job 2."""

import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, SANITIZER_MARKS, SUBREAPER, CgqTestCase, binary,  # noqa: E402
                     main, my_children, proc_cmdline, proc_ppid)

EXAMPLE = os.path.join("orchestration", "examples", "quickstart")


class RunTest(CgqTestCase):
    def run_cgq_run(self, cwd, n, args=None, extra_env=None):
        env = dict(os.environ)
        for k in ("CGQ_REDIS", "CGQ_COORDINATOR", "CGQ_BIND", "CGQ_CONTROL"):
            env.pop(k, None)
        env.update(extra_env or {})
        argv = [binary("cgq"), "run"] + (args or [os.path.join(EXAMPLE, "tune.yaml")])
        t0 = time.monotonic()
        p = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=150)
        elapsed = time.monotonic() - t0
        out = p.stdout.decode("utf-8", "replace")
        err = p.stderr.decode("utf-8", "replace")
        with open(os.path.join(self.cluster.logdir, "cgq-run-%d.log" % n), "w") as f:
            f.write("[exit %d, %.1fs]\n--- stdout\n%s\n--- stderr\n%s\n" % (p.returncode, elapsed,
                                                                          out, err))
        return p.returncode, out, err

    def leaderboard(self, out):
        """[(trial, val_score)] from the table `cgq run` prints on stdout."""
        lines = out.splitlines()
        for i, line in enumerate(lines):
            cols = line.split()
            if "val_score" in cols and "trial" in cols:
                ti, vi = cols.index("trial"), cols.index("val_score")
                rows = []
                for row in lines[i + 1:]:
                    f = row.split()
                    if len(f) < len(cols) or not f[0].isdigit():
                        break
                    rows.append((int(f[ti]), float(f[vi])))
                return rows
        self.fail("no leaderboard table (a header with 'trial' and 'val_score') in stdout:\n%s"
                  % out)

    def check_nothing_left(self, what):
        if not SUBREAPER:
            return
        left = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            left = my_children()
            if not left:
                return
            time.sleep(0.1)
        self.fail("%s: processes left running: %s" % (
            what, ["%d %s" % (p, proc_cmdline(p)[:150]) for p in left]))

    def test_cgq_run_quickstart(self):
        work = os.path.join(self.tmp, "work")
        shutil.copytree(os.path.join(REPO, EXAMPLE), os.path.join(work, EXAMPLE))
        shutil.copytree(os.path.join(REPO, "clients", "python"),
                        os.path.join(work, "clients", "python"),
                        ignore=shutil.ignore_patterns("__pycache__"))

        rc, out, err = self.run_cgq_run(work, 1)
        for mark in SANITIZER_MARKS:
            self.assertNotIn(mark, err)
        self.assertEqual(rc, 0, "cgq run exit status; stderr tail:\n%s" % err[-3000:])
        board = self.leaderboard(out)
        # the default top 10 of 24, best first; the optimum is ~0.95
        self.assertEqual(len(board), 10, "leaderboard rows:\n%s" % out)
        scores = [v for _, v in board]
        self.assertEqual(scores, sorted(scores, reverse=True), "best first:\n%s" % out)
        self.assertGreater(scores[0], 0.85, "best val_score:\n%s" % out)
        self.assertLessEqual(scores[0], 0.97, "best val_score:\n%s" % out)
        self.assertTrue(os.path.isdir(os.path.join(work, ".cgq")), ".cgq/ is created in the cwd")
        self.check_nothing_left("after the first cgq run")

        rc, out2, err2 = self.run_cgq_run(work, 2)
        for mark in SANITIZER_MARKS:
            self.assertNotIn(mark, err2)
        self.assertEqual(rc, 0, "second cgq run; stderr tail:\n%s" % err2[-3000:])
        # same spec, same seed, deterministic noise: the same leaderboard
        self.assertEqual(self.leaderboard(out2), board, "second run's leaderboard")
        self.assertRegex(out2 + err2, r"(?i)\bjob\b[ _-]?(id)?\s*[#:=]?\s*2\b",
                         "the second run is job 2 (state kept in .cgq/)")
        self.check_nothing_left("after the second cgq run")

    def test_cgq_run_device_stages(self):
        """A spec measured on devices: `cgq run` starts a device runner too,
        this CPU as one device for the built-in cpu-local benchmark, or the
        runner.yaml given with --runner (seed 002's simulated board); a board
        benchmark without --runner is refused, saying what to give."""
        work = os.path.join(self.tmp, "dev")
        os.makedirs(work)
        spec = os.path.join(work, "dev.yaml")
        with open(spec, "w") as f:
            f.write("name: local-device\n"
                    "space: {family: {grid: [mobilenetv2, vgg, resnet]}, seed: 3, resolution: 32}\n"
                    "search: {algorithm: grid}\n"
                    "objective: {metric: time, mode: min}\n"
                    "trial: {on: {device: cpu}, benchmark: cpu-local, repeats: 3, warmup: 1}\n")
        rc, out, err = self.run_cgq_run(work, 3, [spec, "--format", "json"])
        for mark in SANITIZER_MARKS:
            self.assertNotIn(mark, err)
        self.assertEqual(rc, 0, "stderr tail:\n%s" % err[-3000:])
        doc = json.loads(out)
        self.assertEqual(len(doc["trials"]), 3)
        for t in doc["trials"]:
            self.assertEqual((t["state"], t["node"]), ("succeeded", "local-runner"), t)
            self.assertGreater(t["metrics"]["time"], 0, t)
            self.assertEqual(t["metrics"]["device"], "local-cpu", t)
        with open(os.path.join(work, ".cgq", "runner.yaml")) as f:
            self.assertIn('{"device":"cpu"}', f.read(), "the device carries the stage's tags")
        self.check_nothing_left("after cgq run of a device spec")

        # Its device runner killed -9 mid-job: cgq run says so, names it, ends
        # with a failure and leaves nothing running.
        slow = os.path.join(work, "slow.yaml")
        with open(spec) as f, open(slow, "w") as g:
            g.write(f.read().replace("resolution: 32", "resolution: 128")
                    .replace("repeats: 3", "repeats: 5000"))
        env = dict(os.environ)
        for k in ("CGQ_REDIS", "CGQ_COORDINATOR", "CGQ_BIND", "CGQ_CONTROL"):
            env.pop(k, None)
        p = subprocess.Popen([binary("cgq"), "run", slow], cwd=work, env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            # Only what this cgq run started: other tests may run device
            # runners of the same binary at the same time.
            def ours():
                out = []
                for x in os.listdir("/proc"):
                    if not x.isdigit():
                        continue
                    pid = up = int(x)
                    for _ in range(64):
                        up = proc_ppid(up)
                        if up in (None, 0, 1) or up == p.pid:
                            break
                    if up == p.pid:
                        out.append(pid)
                return out

            def measuring():
                return [x for x in ours() if "cgq-device-runner measure" in proc_cmdline(x)]
            deadline = time.monotonic() + 60
            while not measuring() and time.monotonic() < deadline and p.poll() is None:
                time.sleep(0.1)
            self.assertTrue(measuring(), "a measurement started")
            runner = [x for x in ours()
                      if proc_cmdline(x).startswith(binary("cgq-device-runner") + " --config")]
            # A child the runner forked shows the runner's command line until
            # it execs: the runner is the one whose parent is not a runner.
            runner = [x for x in runner if proc_ppid(x) not in runner]
            self.assertEqual(len(runner), 1, "one local device runner")
            os.kill(runner[0], 9)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        err = err.decode("utf-8", "replace")
        self.assertEqual(p.returncode, 1, err[-2000:])
        self.assertIn("cgq-device-runner local-runner", err)
        self.check_nothing_left("after the device runner was killed under cgq run")

        # A board's benchmark: refused before anything starts, exit 2.
        bad = os.path.join(work, "bad.yaml")
        with open(spec) as f, open(bad, "w") as g:
            g.write(f.read().replace("benchmark: cpu-local", "benchmark: nnpackage"))
        rc, out, err = self.run_cgq_run(work, 4, [bad])
        self.assertEqual(rc, 2, err)
        self.assertIn("--runner FILE", err)
        self.assertIn("nnpackage", err)
        self.check_nothing_left("after a refused cgq run")

        # Seed 002 in one command: its simulated board's runner.yaml.
        ex = os.path.join(REPO, "orchestration", "examples", "backend-pareto")
        rc, out, err = self.run_cgq_run(
            work, 5, [os.path.join(ex, "random.yaml"), "--runner", os.path.join(ex, "runner.yaml"),
                      "--format", "json"], {"CGQ_SIM_DIR": ex})
        for mark in SANITIZER_MARKS:
            self.assertNotIn(mark, err)
        self.assertEqual(rc, 0, "stderr tail:\n%s" % err[-3000:])
        doc = json.loads(out)
        ok = [t for t in doc["trials"] if t["state"] == "succeeded"]
        self.assertEqual(len(ok), len(doc["trials"]), doc["trials"][:2])
        self.assertTrue(all(t["metrics"]["device"] == "sim-board-1" for t in ok))
        ids = [t["params"]["backends"]["id"] for t in ok]
        self.assertEqual(len(ids), len(set(ids)), "random sampling never repeats an assignment")
        self.check_nothing_left("after cgq run --runner")


if __name__ == "__main__":
    main()
