#!/usr/bin/env python3
"""cgq gc (docs/operations.md, "Checkpoint stores"), against real jobs:

- an ended job in a directory store: --dry-run deletes nothing; gc keeps the
  best trial's latest checkpoint only (its manifest still matching its
  record), deletes the others, an unrecorded one, a dead seal's .tmp, and
  the empty directories, and prints the bytes it freed (counted here);
- a running job: only an unrecorded checkpoint older than the trial's
  latest goes; a .tmp being sealed, a newer unrecorded one (on its way to
  the coordinator) and the recorded ones stay, and the job ends well;
- an ended job in an HTTP store: the recorded checkpoints are DELETEd, the
  best trial's latest stays;
- an unknown job: exit 2.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))
from harness import REPO, CgqTestCase, main  # noqa: E402
from http_store import HttpStore  # noqa: E402
from test_checkpoint import SPEC, TRIAL  # noqa: E402

CLIENTS = os.path.join(REPO, "clients", "python")


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


class CheckpointGcTest(CgqTestCase):
    def job(self, trials=3, epochs=4, sleep="0.1", ckpt="checkpoint: {store: '{spec_dir}/store', keep: 2}"):
        c = self.cluster
        c.write_file("ckpt_trial.py", TRIAL)
        spec = SPEC % dict(clients=CLIENTS, epochs=epochs, sleep=sleep, big=0, ckpt=ckpt)
        spec = spec.replace("x: {grid: [1]}", "x: {grid: [%s]}" % ", ".join(
            str(i) for i in range(trials)))
        return c.submit(c.write_file("ckpt.yaml", spec))

    def rec(self, j, t, field="checkpoint"):
        text = self.cluster.trial(j, t).get(field)
        return json.loads(text) if text else None

    def freed(self, out):
        m = re.search(r"(?:would free|freed) (\d+) bytes", out)
        self.assertIsNotNone(m, out)
        return int(m.group(1))

    def test_ended_job_keeps_only_the_best_trials_latest(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.start_worker("w1", cpus=3)
        j = self.job()
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        best = int(job["best_trial"])
        store = os.path.join(c.specdir, "store", "job-%d" % j)
        keep = self.rec(j, best)
        # Leftovers: a seal that died long ago, an unrecorded checkpoint.
        other = (best + 1) % 3
        dead = os.path.join(store, "trial-%d" % other, "ckpt-1-77.tmp")
        os.makedirs(os.path.join(dead, "files"))
        with open(os.path.join(dead, "files", "x"), "wb") as f:
            f.write(b"x" * 1000)
        os.utime(dead, (time.time() - 600, time.time() - 600))
        shutil.copytree(keep["path"], os.path.join(store, "trial-%d" % best, "ckpt-1-55"))
        before = du(store)
        names = {t: sorted(os.listdir(os.path.join(store, "trial-%d" % t))) for t in range(3)}
        self.assertTrue(all(len([n for n in v if n.startswith("ckpt-1-")]) >= 2
                            for v in names.values()), names)

        r = c.cgq("gc", str(j), "--dry-run")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("would delete", r.stdout)
        self.assertEqual(du(store), before, "a dry run deletes nothing")
        dry = self.freed(r.stdout)

        r = c.cgq("gc", str(j))
        self.assertEqual(r.returncode, 0, r.stderr)
        left = []
        for root, dirs, files in os.walk(store):
            left += [os.path.relpath(os.path.join(root, d), store) for d in dirs
                     if d.startswith("ckpt-")]
        self.assertEqual(left, ["trial-%d/%s" % (best, os.path.basename(keep["path"]))], r.stdout)
        for t in range(3):
            if t != best:
                self.assertFalse(os.path.exists(os.path.join(store, "trial-%d" % t)), r.stdout)
        with open(os.path.join(keep["path"], "manifest"), "rb") as f:
            self.assertEqual(hashlib.sha256(f.read()).hexdigest(), keep["sha256"])
        freed = self.freed(r.stdout)
        self.assertEqual(freed, before - du(store), r.stdout)
        self.assertEqual(freed, dry)
        self.assertIn("ckpt-1-77.tmp", r.stdout)
        self.assertIn("ckpt-1-55", r.stdout)
        # Again: nothing left to do.
        r = c.cgq("gc", str(j))
        self.assertEqual((r.returncode, self.freed(r.stdout)), (0, 0), r.stdout)

    def test_running_job_loses_only_the_unrecorded_and_older(self):
        c = self.cluster
        c.start_redis()
        # 1 s heartbeats: the worker may be paused a moment (below).
        c.start_coordinator(extra=("--durable-after", "100ms"), heartbeat="1s")
        c.start_worker("w1", cpus=1)
        j = self.job(trials=1, epochs=12, sleep="0.5",
                     ckpt="checkpoint: {store: '{spec_dir}/store', keep: 1}")
        rec = c.wait_value(lambda: self.rec(j, 0), lambda r: r and r["n"] >= 4, 60,
                           "checkpoint 4 recorded")
        tdir = os.path.dirname(rec["path"])
        old = os.path.join(tdir, "ckpt-1-1")      # unrecorded, older: goes
        newer = os.path.join(tdir, "ckpt-1-900")  # unrecorded, newer: stays
        sealing = os.path.join(tdir, "ckpt-1-901.tmp")
        # The worker paused while gc runs: its own pruning (on each ack) would
        # delete the older one too, and the test could not tell who did.
        pid = c.workers["w1"].pid
        os.kill(pid, signal.SIGSTOP)
        try:
            rec = self.rec(j, 0)
            tdir = os.path.dirname(rec["path"])
            old = os.path.join(tdir, "ckpt-1-1")
            newer = os.path.join(tdir, "ckpt-1-900")
            sealing = os.path.join(tdir, "ckpt-1-901.tmp")
            for p in (old, newer, sealing):
                if not os.path.exists(p):
                    shutil.copytree(rec["path"], p)
            os.utime(sealing, (time.time() - 600, time.time() - 600))
            r = c.cgq("gc", str(j))
        finally:
            os.kill(pid, signal.SIGCONT)
        self.assertIn("deleted %s " % old, r.stdout)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("running", r.stdout)
        self.assertFalse(os.path.exists(old), r.stdout)
        self.assertTrue(os.path.exists(newer), r.stdout)
        self.assertTrue(os.path.exists(sealing), r.stdout)
        # What the trial's record names now is there (gc never took it).
        now = self.rec(j, 0)
        for k in json.loads(c.trial(j, 0)["checkpoints"]):
            self.assertTrue(os.path.isdir(k["path"]), (k, r.stdout))
        self.assertGreaterEqual(now["n"], rec["n"])
        shutil.rmtree(newer)
        shutil.rmtree(sealing)
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(c.trial(j, 0).get("state"), "succeeded")

    def test_ended_job_in_http_store(self):
        c = self.cluster
        st = HttpStore(os.path.join(c.tmp, "http-store")).start()
        self.addCleanup(st.stop)
        c.start_redis()
        c.start_coordinator()
        c.start_worker("w1", cpus=2)
        j = self.job(trials=2, ckpt="checkpoint: {store: '%s/ck', keep: 2}" % st.url)
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        best = int(job["best_trial"])
        keep = self.rec(j, best)
        recorded = [k for t in range(2) for k in json.loads(c.trial(j, t)["checkpoints"])]
        self.assertEqual(len(recorded), 4, recorded)
        r = c.cgq("gc", str(j))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.freed(r.stdout),
                         sum(k["size"] for k in recorded if k["path"] != keep["path"]), r.stdout)
        manifests = []
        for root, _, files in os.walk(st.root):
            manifests += [os.path.relpath(root, st.root) for f in files if f == "manifest"]
        # Of the recorded ones only the best trial's latest is left (with all
        # its files). An HTTP store cannot be listed: one the worker sealed
        # but did not get to prune (its ack came after its task ended) is
        # not found, and gc says so.
        for k in recorded:
            rel = k["path"][len(st.url) + 1:]
            self.assertEqual(rel in manifests, k["path"] == keep["path"], (k, manifests))
        self.assertTrue(os.path.isfile(os.path.join(st.root, keep["path"][len(st.url) + 1:],
                                                    "files", "state.json")))
        self.assertIn("cannot be listed", r.stdout)
        dels = [q for q in st.requests if q[0] == "DELETE"]
        self.assertTrue(dels and all(q[2] == 204 for q in dels), dels)

    def test_unknown_job(self):
        c = self.cluster
        c.start_redis()
        r = c.cgq("gc", "999")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("no job 999", r.stderr)


if __name__ == "__main__":
    main()
