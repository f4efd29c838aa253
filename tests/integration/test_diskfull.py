#!/usr/bin/env python3
"""A full disk under the worker (issue 31): the worker's --workdir is a 1 MiB
tmpfs (root only: skipped with the reason elsewhere).

- A trial that fills the disk, then writes result.json (which the disk cuts
  to 0 bytes) and exits 0 is FAILED with "result.json could not be written:
  No space left on device", not succeeded with its last progress report as
  the result; its stdout.log ends with a "[cgq: log truncated at N bytes: No
  space left on device ...]" marker line.
- The next trial, the disk still full and no result.json written, succeeds
  with its last report and a warning that its log was cut and there is no
  result.json; the worker stays up throughout.
- Once space is back (the filler removed) the next trial runs clean: its
  result.json is the result, no marker, no warning.
- A checkpoint announced on the full disk (the worker's own store under
  --workdir) fails its attempt with the store's reason; the worker goes on.
- No inodes left (nr_inodes=200): once the two directories made ahead are
  used, a trial whose directory cannot be made is lost with "the filesystem
  of the worker's --workdir is full"; with inodes back, trials run.
"""

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main, metrics_of, pid_alive  # noqa: E402

# Reports once, logs a few lines (and waits so that the worker has them in
# stdout.log), fills the disk, logs more (the log is cut), then writes its
# result.json unless told not to.
FILL = r'''#!/bin/sh
echo '{"score": 1}' >&3
i=0
while [ $i -lt 40 ]; do echo "before the disk fills, line $i"; i=$((i+1)); done
sleep 0.5
cat /dev/zero > "$CGQ_TRIAL_DIR/fill.bin"
i=0
while [ $i -lt 2000 ]; do echo "after the disk filled, line $i"; i=$((i+1)); done
sleep 0.3
if [ "$1" = write ]; then echo '{"score": 99}' > result.json; fi
exit 0
'''

CLEAN = r'''#!/bin/sh
echo '{"score": 1}' >&3
echo "a line of a trial with room"
echo '{"score": 7}' > result.json
'''

# Saves a checkpoint, fills the disk, then announces the checkpoint: the
# worker's own store (WORKDIR/checkpoints) is on the full disk.
CKPT = r'''#!/bin/sh
head -c 8192 /dev/urandom > "$CGQ_CHECKPOINT_DIR/model.bin"
cat /dev/zero > "$CGQ_TRIAL_DIR/fill.bin"
echo '{"checkpoint": true, "epoch": 1}' >&3
sleep 2
echo '{"score": 5}' >&3
'''

SPEC = '''name: diskfull-%(name)s
space:
  x: 1
objective: {metric: score, mode: max}
trial:
  command: sh {spec_dir}/%(script)s
  timeout: 60s
  retries: 0
%(extra)s'''

MARKER = (r"\[cgq: log truncated at \d+ bytes: No space left on device"
          r"( \(its last \d+ bytes were dropped to make room for this line\))?\]\n$")


class DiskFullTest(CgqTestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to mount a small tmpfs as the worker's --workdir")
        super().setUp()
        self.mnt = os.path.join(self.tmp, "w1")
        os.makedirs(self.mnt)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "none", self.mnt],
                           capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            self.skipTest("cannot mount a tmpfs at %s: %s" % (self.mnt, r.stderr.strip()))
        # After tearDown (which stops the worker), before the temp dir goes.
        self.addCleanup(self._umount)

    def _umount(self):
        r = subprocess.run(["umount", self.mnt], capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            subprocess.run(["umount", "-l", self.mnt], capture_output=True, timeout=20)

    def _start(self, min_free="0"):
        # --min-free 0: these trials must run on the full disk (the worker
        # would otherwise take none there, see test_refuses_tasks_while_full).
        c = self.start_default(workers=())
        c.start_worker("w1", cpus=1, extra=["--min-free", min_free])
        return c

    def _run(self, c, name, script, extra=""):
        j = c.submit(c.write_file("%s.yaml" % name, SPEC % {"name": name, "script": script,
                                                              "extra": extra}))
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        return c.trial(j, 0)

    def _read(self, t, name):
        with open(os.path.join(t["trial_dir"], name), "rb") as f:
            return f.read().decode("utf-8", "replace")

    def test_full_disk(self):
        c = self._start()
        worker = c.workers["w1"]
        c.write_file("fill-write.sh", FILL.replace('"$1"', "write"))
        c.write_file("fill-nowrite.sh", FILL.replace('"$1"', "nowrite"))
        c.write_file("clean.sh", CLEAN)

        # 1. The result.json write fails: failed, not the last report.
        t = self._run(c, "write", "fill-write.sh")
        self.assertEqual(t.get("state"), "failed", t)
        self.assertRegex(t.get("error", ""),
                         r"^result\.json could not be written: No space left on device "
                         r"\(it holds 0 bytes, ", t)
        self.assertRegex(t.get("error", ""), r"stdout\.log truncated at \d+ bytes: "
                                             r"No space left on device", t)
        self.assertNotEqual(metrics_of(t).get("score"), 99, t)
        out = self._read(t, "stdout.log")
        self.assertRegex(out, MARKER, "stdout.log does not end with the marker:\n" + out[-600:])
        self.assertNotIn("after the disk filled, line 1999", out)
        self.assertTrue(pid_alive(worker.popen.pid), "the worker died on the full disk")

        # 2. Still full, no result.json: succeeded with the last report and a warning.
        t = self._run(c, "nowrite", "fill-nowrite.sh")
        self.assertEqual(t.get("state"), "succeeded", t)
        self.assertEqual(metrics_of(t).get("score"), 1, t)
        w = t.get("warning", "")
        self.assertRegex(w, r"stdout\.log truncated at \d+ bytes: No space left on device", t)
        self.assertIn("no result.json: the result is the last report", w, t)
        self.assertTrue(pid_alive(worker.popen.pid), "the worker died on the full disk")
        self.assertEqual(c.redis.hgetall("cgq:node:w1").get("state"), "alive")

        # 3. Space back: the next trial runs clean.
        fills = glob.glob(os.path.join(self.mnt, "**", "fill.bin"), recursive=True)
        self.assertTrue(fills, "no fill.bin under the workdir")
        for f in fills:
            os.unlink(f)
        t = self._run(c, "clean", "clean.sh")
        self.assertEqual(t.get("state"), "succeeded", t)
        self.assertEqual(json.loads(t.get("metrics")), {"score": 7}, t)
        self.assertEqual(t.get("warning", ""), "", t)
        self.assertEqual(self._read(t, "stdout.log"), "a line of a trial with room\n")

    def test_full_disk_checkpoint(self):
        c = self._start()
        worker = c.workers["w1"]
        c.write_file("ckpt.sh", CKPT)
        c.write_file("clean.sh", CLEAN)
        t = self._run(c, "ckpt", "ckpt.sh", extra="checkpoint: {keep: 1}\n")
        self.assertEqual(t.get("state"), "failed", t)
        self.assertRegex(t.get("error", ""), r"^cannot seal checkpoint 1 .*No space left on device", t)
        self.assertTrue(pid_alive(worker.popen.pid), "the worker died on the full disk")
        for f in glob.glob(os.path.join(self.mnt, "**", "fill.bin"), recursive=True):
            os.unlink(f)
        t = self._run(c, "clean", "clean.sh")
        self.assertEqual(t.get("state"), "succeeded", t)
        self.assertEqual(json.loads(t.get("metrics")), {"score": 7}, t)

    def test_no_inodes_left(self):
        # Remount with few inodes, then take every one left: no trial
        # directory can be made. Each attempt is lost with the reason (the
        # worker stays up); once inodes are free the trial runs.
        self._umount()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,nr_inodes=200,mode=0700",
                            "none", self.mnt], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        c = self._start()
        worker = c.workers["w1"]
        c.write_file("clean.sh", CLEAN)
        time.sleep(0.5)  # the spare directories are made
        hog = os.path.join(self.mnt, "hog")
        os.mkdir(hog)
        n = 0
        try:
            while n < 1000:
                open(os.path.join(hog, "f%d" % n), "w").close()
                n += 1
        except OSError:
            pass
        self.assertLess(n, 1000, "the tmpfs did not run out of inodes")
        # The first trial gets the directory the worker made ahead; its own
        # result.json cannot be created: failed, with the shell's reason.
        t = self._run(c, "inodes1", "clean.sh")
        self.assertEqual(t.get("state"), "failed", t)
        self.assertIn("No space left on device", t.get("error", ""), t)
        # The worker keeps two directories made ahead (1 cpu); once they are
        # used, it cannot make the next trial's: lost with the reason.
        hint = (r"No space left on device \(the filesystem of the worker's --workdir is "
                r"full, of space or of inodes: free some\)")
        for k in range(2, 6):
            j = c.submit(c.write_file("inodes%d.yaml" % k,
                                      SPEC % {"name": "inodes%d" % k, "script": "clean.sh",
                                              "extra": ""}))
            c.wait_for(lambda: re.search(hint, c.trial(j, 0).get("error") or "")
                       or c.trial(j, 0).get("state") in ("failed", "succeeded"), 30,
                       "the trial to be lost or to end")
            t = c.trial(j, 0)
            if re.search(hint, t.get("error", "")):
                break
            self.assertEqual(t.get("state"), "failed", t)
        self.assertRegex(t.get("error", ""), r"^cannot create (trial|checkpoint) directory "
                                             r"\S+: " + hint, t)
        self.assertTrue(pid_alive(worker.popen.pid), "the worker died with no inodes left")
        shutil.rmtree(hog)
        c.wait_job(j, 60)  # its attempts may all be lost by now (6 on one node)
        t = self._run(c, "inodes-back", "clean.sh")
        self.assertEqual(t.get("state"), "succeeded", t)
        self.assertEqual(json.loads(t.get("metrics")), {"score": 7}, t)

    def test_refuses_tasks_while_full(self):
        # --min-free 512K on the 1 MiB tmpfs: a filler leaves less, the
        # worker says so within a couple of heartbeats and takes no trial;
        # the filler removed, it takes them again and the job finishes.
        c = self._start(min_free="512K")
        node = lambda: c.redis.hgetall("cgq:node:w1")  # noqa: E731
        self.assertEqual(node().get("full"), "", node())
        filler = os.path.join(self.mnt, "filler.bin")
        with open(filler, "wb") as f:
            f.write(b"\0" * (640 * 1024))
        c.wait_for(lambda: "under --min-free 0.5 MiB" in (node().get("full") or ""), 10,
                   "the worker to say its disk is full")
        j = c.submit(c.write_counted_job("whilefull", 3, 0))
        time.sleep(2.5)
        job = c.job(j)
        for k in ("running", "failed", "stale", "succeeded"):
            self.assertEqual(job.get(k, "0"), "0", job)
        self.assertFalse(os.path.exists(os.path.join(c.specdir, "runs.txt")),
                         "a trial started on the full disk")
        os.unlink(filler)
        c.wait_for(lambda: node().get("full") == "", 10, "the worker to take tasks again")
        self.assert_exactly_once(j, 3, timeout=60)


if __name__ == "__main__":
    main()
