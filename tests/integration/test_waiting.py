#!/usr/bin/env python3
"""Waiting, seen from the user's side.

- A worker pointed at a coordinator that is not there says so in its log, with
  the endpoint, each time it retries (not only `connecting ...`).
- `cgq submit --follow` of a job no connected node can run shows why
  (`needs gpu 1 but ...`) and how to stop waiting, and its progress line fits
  a narrow terminal without cutting a word; Ctrl-C stops following (130)
  and the job keeps waiting.
"""

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, binary, free_port, main, read_text  # noqa: E402

GPU_SPEC = '''name: needs-a-gpu-with-a-rather-long-name-to-fill-the-progress-line
space:
  i: {grid: [0, 1]}
objective: {metric: score, mode: max}
trial:
  command: "true"
  resources: {gpu: 1}
'''

PIECE = re.compile(r"^(\[[#.]{20}\]|\d+/[\d?]+|running \d+|failed \d+|unschedulable \d+|"
                   r"best \S+=\S+ \(trial \d+\)|\d+:\d\d(:\d\d)?|ETA \d+:\d\d(:\d\d)?)$")


class WaitingTest(CgqTestCase):
    def test_dead_coordinator_logged(self):
        c = self.cluster
        c.nodes_ep = "tcp://127.0.0.1:%d" % free_port()  # nothing listens there
        w = c.start_worker("lonely", wait=False)
        c.wait_for(lambda: read_text(w.err_path).count("no answer from coordinator %s" % c.nodes_ep)
                   >= 1, 20, "the worker to log that %s does not answer" % c.nodes_ep)
        log = read_text(w.err_path)
        self.assertIn("is it running, and is --coordinator its nodes endpoint?", log)
        self.assertIn("retrying (try 2)", log)

    def test_follow_unschedulable(self):
        c = self.start_default(workers=(("w1", 2),))
        spec = c.write_file("gpu.yaml", GPU_SPEC)
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))

        def setup():
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        p = subprocess.Popen([binary("cgq"), "submit", spec, "--follow"], stdin=slave,
                             stdout=slave, stderr=slave, env=c.cli_env(), preexec_fn=setup)
        out = b""
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and b"cancels the job)" not in out:
                r, _, _ = select.select([master], [], [], 0.1)
                if r:
                    out += os.read(master, 65536)
            text = out.decode("utf-8", "replace")
            self.assertRegex(text, r"cgq: job (\d+) waits: needs gpu 1 but the 1 connected "
                             r"node\(s\) have at most 0 GPU\(s\)")
            j = int(re.search(r"cgq: job (\d+) waits", text).group(1))
            self.assertIn("Ctrl-C stops waiting, cgq cancel %d cancels the job)" % j, text)
            # a few redraws of the progress line
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                r, _, _ = select.select([master], [], [], 0.1)
                if r:
                    out += os.read(master, 65536)
            os.write(master, b"\x03")
            self.assertEqual(p.wait(10), 130)
            r, _, _ = select.select([master], [], [], 0.5)
            while r:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                out += data
                r, _, _ = select.select([master], [], [], 0.2)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            os.close(master)
            os.close(slave)
        text = out.decode("utf-8", "replace")
        for mark in ("AddressSanitizer", "LeakSanitizer", "runtime error"):
            self.assertNotIn(mark, text)
        self.assertIn("stopped following job %d; it keeps running (cgq cancel %d stops it)" % (j, j),
                      text)
        # every drawn progress line fits the 60 columns (59: the last one wraps on
        # some terminals) and is made of whole pieces: what does not fit is left out
        lines = [seg.split("\x1b[K")[0] for seg in re.split(r"[\r\n]+", text)
                 if seg.startswith("[") or re.match(r"^\d+/\d+", seg)]
        self.assertTrue(lines, text)
        for line in lines:
            line = line.split("\x1b[K")[0]
            self.assertLessEqual(len(line), 59, line)
            for piece in line.split("  "):
                self.assertRegex(piece, PIECE, "a whole piece in %r" % line)
            self.assertRegex(line, r"^\d+/2  running 0  failed 0  unschedulable [12]", line)
        self.assertEqual(c.job(j).get("state"), "running", "the job keeps waiting")


if __name__ == "__main__":
    main()
