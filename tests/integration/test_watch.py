#!/usr/bin/env python3
"""`cgq watch`, `cgq plot` and `cgq status` against a real job.

A grid of 4 trials that report 4 epochs each; trial 3 waits after its third
report until the test releases it. While it waits the job stands still (3
succeeded, 1 running), so the screen can be compared with Redis:

- `cgq watch` in a pseudo-terminal shows the job's counts as Redis has them,
  the running trial's latest report, the node; it fits a narrower window after
  SIGWINCH; `q` exits 0 and Ctrl-C exits 130, both with the terminal mode as it
  was; a watch left running exits by itself when the job ends, with the summary.
- with stdout a pipe, plain progress lines, then the same summary.
- `cgq plot` writes an SVG that parses, with a dot per finished trial, the
  best-so-far staircase, and a learning curve of 4 points per trial.
- `cgq status` lists the job on one aligned line.
"""

import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, binary, main  # noqa: E402

TRIAL = r'''
import json, os, sys, time
i, release = int(sys.argv[1]), sys.argv[2]
out = os.fdopen(3, "w")
for e in range(1, 5):
    if i == 3 and e == 4:
        while not os.path.exists(release):
            time.sleep(0.05)
    out.write(json.dumps({"epoch": e, "score": i + e / 10.0}) + "\n")
    out.flush()
    time.sleep(0.12)
'''

SPEC = '''name: watch-itest
space:
  i: {grid: [0, 1, 2, 3]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/lc.py {i} {spec_dir}/release
  resources: {cpu: 1}
'''

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SVG = "{http://www.w3.org/2000/svg}"


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Pty:
    """cgq watch on a new pseudo-terminal that is its controlling terminal."""

    def __init__(self, argv, env, rows=40, cols=120):
        self.master, self.slave = os.openpty()
        set_size(self.slave, rows, cols)
        self.mode_before = termios.tcgetattr(self.slave)
        slave = self.slave

        def child_setup():
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                     preexec_fn=child_setup, close_fds=True)
        self.out = b""

    def read_until(self, pred, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self.text()):
                return self.text()
            r, _, _ = select.select([self.master], [], [], 0.1)
            if r:
                try:
                    self.out += os.read(self.master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
        if pred(self.text()):
            return self.text()
        raise AssertionError("screen never showed %s; it shows:\n%s" % (what, self.text()[-3000:]))

    def drain(self, timeout=5):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            r, _, _ = select.select([self.master], [], [], 0.1)
            if r:
                try:
                    self.out += os.read(self.master, 65536)
                except OSError:
                    break
        while True:
            r, _, _ = select.select([self.master], [], [], 0.1)
            if not r:
                break
            try:
                data = os.read(self.master, 65536)
            except OSError:
                break
            if not data:
                break
            self.out += data

    def text(self):
        return self.out.decode("utf-8", "replace")

    def last_frame(self, since=0):
        """The last whole frame (cursor home .. erase below) drawn after
        byte since, escapes removed, as lines; None when there is none."""
        t = self.out[since:].decode("utf-8", "replace")
        end = t.rfind("\x1b[J")
        if end < 0:
            return None
        start = t.rfind("\x1b[H", 0, end)
        if start < 0:
            return None
        return [ANSI.sub("", l).rstrip("\r") for l in t[start:end].split("\n")]

    def wait_frame(self, pred, timeout, what, since=0):
        self.read_until(lambda s: (self.last_frame(since) is not None
                                   and pred("\n".join(self.last_frame(since)))), timeout, what)
        return self.last_frame(since)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        else:
            self.drain(0.5)
        os.close(self.master)
        os.close(self.slave)
        for mark in ("AddressSanitizer", "LeakSanitizer", "runtime error"):
            if mark in self.text():
                raise AssertionError("cgq watch: sanitizer report:\n" + self.text()[-4000:])


class WatchTest(CgqTestCase):
    def counts_line(self, job):
        return "  ".join("%s %s" % (s, job.get(s) or "0") for s in (
            "pending", "running", "succeeded", "failed", "stopped", "cancelled", "unschedulable"))

    def test_watch_shows_the_front(self):
        # Issue 23: a job with several objectives shows its front's trials,
        # not only its size.
        c = self.start_default(workers=(("w1", 2),))
        j = c.submit(c.write_file("two.yaml", """name: two
space: {x: {uniform: [0, 1]}, y: {uniform: [0, 1]}}
search: {algorithm: random, samples: 30, seed: 3, concurrency: 1}
objectives: [{metric: x, mode: min}, {metric: y, mode: max}]
trial: {command: "sleep 0.2; echo '{{\\"x\\": {x}, \\"y\\": {y}}}' >&3", resources: {cpu: 1}}
"""))
        c.wait_for(lambda: int(c.job(j).get("succeeded") or 0) >= 4, 60, "4 trials to succeed")
        t = Pty([binary("cgq"), "watch", str(j), "--interval", "200"], c.cli_env())
        try:
            frame = t.wait_frame(lambda s: "pareto front:" in s and "nodes (1)" in s, 20,
                                 "a frame with the front")
            screen = "\n".join(frame)
            kept = c.redis.hgetall("cgq:job:{%d}:pareto" % j)
            m = re.search(r"pareto front: (\d+) trials? \(cgq pareto %d\), best first in x:" % j,
                          screen)
            self.assertTrue(m, screen)
            at = frame.index([l for l in frame if "pareto front:" in l][0])
            self.assertEqual(frame[at + 1].split()[:3], ["trial", "x", "y"], screen)
            row = frame[at + 2].split()
            h = c.trial(j, int(row[0]))
            mx = json.loads(h["metrics"])["x"]
            self.assertEqual((h["state"], row[1]), ("succeeded", "%.6g" % mx), (row, h))
            self.assertTrue(kept, "the coordinator keeps a front")
            os.write(t.master, b"q")
            self.assertEqual(t.proc.wait(10), 0)
        finally:
            t.close()

    def test_watch_plot_status(self):
        c = self.start_default(workers=(("w1", 4),))
        c.write_file("lc.py", TRIAL)
        j = c.submit(c.write_file("watch.yaml", SPEC))
        c.wait_for(lambda: c.job(j).get("succeeded") == "3" and c.job(j).get("running") == "1"
                   and int(c.trial(j, 3).get("reports") or 0) >= 3, 60,
                   "3 trials to succeed and trial 3 to report 3 times")
        job = c.job(j)
        env = c.cli_env()

        # -- the live view in a terminal; q quits
        t = Pty([binary("cgq"), "watch", str(j), "--interval", "200"], env)
        try:
            frame = t.wait_frame(lambda s: "nodes (1)" in s, 20, "the whole frame")
            screen = "\n".join(frame)
            self.assertIn(self.counts_line(job), screen, "counts as in Redis %s" % job)
            self.assertIn("cgq watch: job %d watch-itest  running" % j, screen)
            self.assertRegex(screen, r"\[#+\.*\]  3/4  running 1  failed 0  best score=2\.4 \(trial 2\)")
            self.assertIn("ETA", screen)
            self.assertRegex(screen, r"\n\s+1\s+2\s+2\.4\s+i=2", "top trial with its params")
            last = json.loads(c.trial(j, 3)["last_report"])
            self.assertEqual(last["epoch"], 3)
            self.assertRegex(screen, r"\n\s+3\s+w1\s+\d+:\d\d\s+3\s+\{\"epoch\": ?3",
                             "the running trial and its latest report")
            self.assertRegex(screen, r"\n\s+w1\s+alive\s+1/4\s+0/0\s+1\s+worker")
            self.assertTrue(all(len(l) < 120 for l in frame), frame)
            mode = termios.tcgetattr(t.slave)
            self.assertFalse(mode[3] & termios.ICANON, "watch reads keys one by one")
            self.assertFalse(mode[3] & termios.ECHO, "watch does not echo keys")

            # a narrower window: every line fits after SIGWINCH
            set_size(t.slave, 30, 50)
            t.proc.send_signal(signal.SIGWINCH)
            n = len(t.out)
            frame = t.wait_frame(lambda s: "nodes (1)" in s, 10, "a frame redrawn after SIGWINCH",
                                 since=n)
            self.assertTrue(all(len(l) <= 49 for l in frame), "fits 50 columns: %s" % frame)
            self.assertIn("3/4  running 1  failed 0", "\n".join(frame))

            os.write(t.master, b"q")
            self.assertEqual(t.proc.wait(10), 0, t.text()[-2000:])
            t.drain(2)
            self.assertEqual(termios.tcgetattr(t.slave), t.mode_before, "terminal mode restored")
            self.assertIn("\x1b[?1049l", t.text(), "left the alternate screen")
            self.assertTrue(t.text().rstrip().endswith("ETA") is False)
        finally:
            t.close()

        # -- Ctrl-Z gives the terminal back before stopping (here the process
        # group is orphaned, so the kernel does not stop it: it takes the
        # screen again); then Ctrl-C: 130, mode restored
        t = Pty([binary("cgq"), "watch", str(j), "--interval", "200"], env)
        try:
            t.wait_frame(lambda s: "nodes (1)" in s, 20, "the frame")
            n = len(t.out)
            os.write(t.master, b"\x1a")
            t.read_until(lambda s: "\x1b[?1049l" in s[n:] and "\x1b[?1049h" in
                         s[s.rfind("\x1b[?1049l"):], 10, "the screen left and taken again after ^Z")
            t.wait_frame(lambda s: "nodes (1)" in s, 10, "a frame after ^Z", since=n)
            self.assertIsNone(t.proc.poll())
            os.write(t.master, b"\x03")
            self.assertEqual(t.proc.wait(10), 130, t.text()[-2000:])
            self.assertEqual(termios.tcgetattr(t.slave), t.mode_before, "mode restored after ^C")
        finally:
            t.close()

        # -- not a terminal: plain lines
        plain = subprocess.Popen([binary("cgq"), "watch", str(j), "--interval", "200"], env=env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        first = plain.stdout.readline().decode()
        self.assertRegex(first, r"^\[#+\.*\]  3/4  running 1  failed 0  best score=2\.4 \(trial 2\)")
        self.assertNotIn("\x1b", first)

        # -- a watch left running ends by itself with the job
        t = Pty([binary("cgq"), "watch", str(j), "--interval", "200"], env)
        try:
            t.wait_frame(lambda s: "nodes (1)" in s, 20, "the frame")
            c.write_file("release", "")
            self.assertEqual(t.proc.wait(30), 0, t.text()[-2000:])
            t.drain(2)
            tail = t.text()[t.text().rfind("\x1b[?1049l"):]
            self.assertRegex(tail, r"\[#{20}\]  4/4  running 0  failed 0  best score=3\.4 \(trial 3\)")
            self.assertRegex(tail, r"rank\s+trial\s+score\s+i\s+duration")
            self.assertEqual(termios.tcgetattr(t.slave), t.mode_before)
        finally:
            t.close()
        out, err = plain.communicate(timeout=30)
        self.assertEqual(plain.returncode, 0, err)
        self.assertIn("4/4  running 0", out.decode())
        self.assertRegex(out.decode(), r"\n\s*1\s+3\s+3\.4\s+3\s")
        self.assertIn("job %d finished: 4 trials succeeded" % j, err.decode())
        self.assertNotIn("\x1b", out.decode())

        # -- plot
        svg = os.path.join(c.specdir, "plot.svg")
        r = c.cgq("plot", j, "--out", svg)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("learning curves (score) of 4", r.stdout)
        root = ET.parse(svg).getroot()
        plots = root.findall(SVG + "svg")
        self.assertEqual(len(plots), 2)
        series = {g.get("data-name"): g for g in plots[0].iter(SVG + "g") if g.get("class") == "series"}
        self.assertEqual(len(series["each trial"].findall(SVG + "circle")), 4)
        steps = series["best so far"].findall(SVG + "polyline")
        self.assertEqual(len(steps), 1)
        self.assertEqual(len(steps[0].get("points").split()), 2 * 4 - 1, "a staircase of 4 points")
        ticks = [g for g in plots[0].iter(SVG + "g") if g.get("class") == "ticks"][0]
        xt = [t.text for t in ticks.findall(SVG + "text") if t.get("text-anchor") == "middle"]
        self.assertEqual(xt, ["1", "2", "3", "4"], "whole trials on the x axis")
        curves = [g for g in plots[1].iter(SVG + "g") if g.get("class") == "series"]
        self.assertEqual(sorted(g.get("data-name") for g in curves),
                         ["trial 0", "trial 1", "trial 2", "trial 3"])
        for g in curves:
            lines = g.findall(SVG + "polyline")
            self.assertEqual(len(lines), 1)
            self.assertEqual(len(lines[0].get("points").split()), 4, "one point per report")
        r = c.cgq("plot", j)
        self.assertEqual(r.returncode, 2)
        self.assertIn("needs --out", r.stderr)

        # -- status: one aligned line per job
        r = c.cgq("status")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["id", "name", "state", "done/total", "running",
                                            "failed", "best", "age"])
        self.assertRegex(lines[1], r"^\s*%d\s+watch-itest\s+finished\s+4/4\s+0\s+0\s+score=3\.4 \(trial 3\)\s+\d+s$" % j)


if __name__ == "__main__":
    main()
