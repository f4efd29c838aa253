#!/usr/bin/env python3
"""Pruning keeps up with fast trials (docs/architecture.md, "Checkpoints",
Recording): 8 trials that each checkpoint 4 times in 0.3 s with `keep: 2`.

A CheckpointAck leaves the coordinator once its batch is durable
(--durable-after, 3 s by default), so a fast trial's last acks reach its
worker after the task, often after the whole job, has ended. The worker
still prunes on them:

- a worker that stays up: once the job has ended the store holds exactly
  what the trials' records name (within the durability window);
- a worker stopped (SIGTERM) the moment the job ends: its shutdown waits
  (bounded) for those acks and the prunes they ask for, so the store it
  leaves holds exactly what the records name. Before this was fixed the
  shutdown dropped the acks and every trial kept checkpoints 1 and 2.

Both in a directory store and in an HTTP store.
"""

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))
from harness import REPO, CgqTestCase, main  # noqa: E402
from http_store import HttpStore  # noqa: E402
from test_checkpoint import SPEC, TRIAL  # noqa: E402

CLIENTS = os.path.join(REPO, "clients", "python")
TRIALS = 8


class CheckpointPruneTest(CgqTestCase):
    def job(self, ckpt):
        c = self.cluster
        c.write_file("ckpt_trial.py", TRIAL)
        spec = SPEC % dict(clients=CLIENTS, epochs=4, sleep="0.075", big=0, ckpt=ckpt)
        spec = spec.replace("x: {grid: [1]}", "x: {grid: [%s]}" % ", ".join(
            str(i) for i in range(TRIALS)))
        return c.submit(c.write_file("ckpt.yaml", spec))

    def named(self, j):
        out = {}
        for t in range(TRIALS):
            text = self.cluster.trial(j, t).get("checkpoints")
            out[t] = sorted(os.path.basename(k["path"]) for k in json.loads(text or "[]"))
        return out

    def run_job(self, stop_worker, store):
        """Runs the job against store ('dir' or an HttpStore); returns (named,
        held) once it has ended (and its worker stopped, or the store settled)."""
        c = self.cluster
        c.start_redis()
        # The default durability window (3 s): the acks come well after the job.
        c.start_coordinator(extra=("--durable-after", "3s"))
        c.start_worker("w1", cpus=4)
        if store == "dir":
            j = self.job("checkpoint: {store: '{spec_dir}/store', keep: 2}")
            root = os.path.join(c.specdir, "store", "job-%d" % j)

            def stored():
                out = {}
                for t in range(TRIALS):
                    d = os.path.join(root, "trial-%d" % t)
                    out[t] = sorted(n for n in (os.listdir(d) if os.path.isdir(d) else [])
                                    if n.startswith("ckpt-"))
                return out
        else:
            j = self.job("checkpoint: {store: '%s/ck', keep: 2}" % store.url)

            def stored():
                out = {t: [] for t in range(TRIALS)}
                for root, _, files in os.walk(store.root):
                    if "manifest" not in files:
                        continue
                    parts = os.path.relpath(root, store.root).split(os.sep)
                    trial = [p for p in parts if p.startswith("trial-")]
                    if ("job-%d" % j) in parts and trial:
                        out[int(trial[0][6:])].append(parts[-1])
                return {t: sorted(v) for t, v in out.items()}
        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        if stop_worker:
            t0 = time.time()
            self.assertIsNone(c.workers["w1"].stop())
            # Bounded: the shutdown waits 5 s at most for the acks.
            self.assertLess(time.time() - t0, 12)
            return self.named(j), stored()
        deadline = time.time() + 8
        while True:
            named, held = self.named(j), stored()
            if named == held or time.time() > deadline:
                return named, held
            time.sleep(0.2)

    def check(self, named, held):
        for t in range(TRIALS):
            self.assertEqual(len(named[t]), 2, named)  # keep: 2 of 4 checkpoints
        self.assertEqual(held, named, "the store holds exactly what the records name")

    def http(self):
        st = HttpStore(os.path.join(self.cluster.tmp, "http-store")).start()
        self.addCleanup(st.stop)
        return st

    def test_directory_store_live_worker(self):
        self.check(*self.run_job(False, "dir"))

    def test_directory_store_worker_stopped_at_end(self):
        self.check(*self.run_job(True, "dir"))

    def test_http_store_live_worker(self):
        self.check(*self.run_job(False, self.http()))

    def test_http_store_worker_stopped_at_end(self):
        self.check(*self.run_job(True, self.http()))


if __name__ == "__main__":
    main()
