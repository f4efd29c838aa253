#!/usr/bin/env python3
"""A trial that ran on GPU position 1 of a two-GPU worker, lost when that
worker leaves, re-runs on a one-GPU worker: it must get a fresh GPU grant on
the new node (GPU index 0), not the old node's position (which does not exist
there: an out-of-bounds read in the coordinator, or a GPU already granted to
another trial)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main, read_text  # noqa: E402

# Attempt 1 runs until its worker is stopped; later attempts end quickly.
SCRIPT = r'''
import json, os, sys, time
rec = {"trial": int(os.environ["CGQ_TRIAL_ID"]), "attempt": int(os.environ["CGQ_ATTEMPT"]),
       "cvd": os.environ.get("CUDA_VISIBLE_DEVICES")}
with open(os.path.join(os.environ["CGQ_SPEC_DIR"], "runs.txt"), "a") as f:
    f.write(json.dumps(rec) + "\n")
time.sleep(60 if rec["attempt"] == 1 else 0.5)
os.write(3, b'{"score": 1}\n')
'''

SPEC = '''name: gpu-regrant-itest
space:
  i: {grid: [0, 1]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/g.py
  resources: {gpu: 1, cpu: 1}
  timeout: 2m
'''


class GpuRegrantTest(CgqTestCase):
    def test_lost_trial_gets_a_fresh_gpu_grant(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        gx = c.start_worker("gx", cpus=4, gpus="fake:2")
        c.write_file("g.py", SCRIPT)
        j = c.submit(c.write_file("g.yaml", SPEC))
        running = c.wait_value(
            lambda: {t: h for t, h in c.trials(j).items() if h.get("state") == "running"},
            lambda ts: len(ts) == 2, 30, "both trials to run on gx")
        self.assertEqual(sorted(h.get("gpus") for h in running.values()), ["0", "1"], running)

        # A one-GPU worker joins; then gx leaves (Bye): both trials return to
        # the queue and run one after the other on gy's only GPU.
        c.start_worker("gy", cpus=4, gpus="fake:1")
        problem = gx.stop()
        self.assertIsNone(problem, problem)
        gx.expect_exit = None  # stopped on purpose; not "exited early"

        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "2", job)
        for t, h in c.trials(j).items():
            self.assertEqual(h.get("node"), "gy", "trial %d: %s" % (t, h))
            self.assertEqual(h.get("attempt"), "2", "trial %d: %s" % (t, h))
            self.assertEqual(h.get("gpus"), "0", "trial %d got gy's GPU 0: %s" % (t, h))
        with open(os.path.join(c.specdir, "runs.txt")) as f:
            runs = [json.loads(line) for line in f if line.strip()]
        for r in runs:
            if r["attempt"] == 2:
                self.assertEqual(r["cvd"], "0", "CUDA_VISIBLE_DEVICES on gy: %s" % r)
        self.assertNotIn("over-committed", read_text(c.coordinator.err_path),
                         "the coordinator over-committed a node")


if __name__ == "__main__":
    main()
