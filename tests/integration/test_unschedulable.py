#!/usr/bin/env python3
"""k. A trial needing a whole GPU while the only worker has none is
unschedulable, with the reason in `cgq status` and the job's `blocked` field;
when a worker with a (fake) GPU joins, the job completes there."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main  # noqa: E402

SCRIPT = r'''
import os, time
time.sleep(0.2)
os.write(3, ('{"score": 1, "cvd": "%s"}\n' % os.environ.get("CUDA_VISIBLE_DEVICES")).encode())
'''

SPEC = '''name: gpu-needed
space:
  i: {grid: [0, 1]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/needgpu.py
  resources: {gpu: 1, cpu: 1}
'''


class UnschedulableTest(CgqTestCase):
    def test_unschedulable_until_gpu_worker_joins(self):
        c = self.start_default(workers=(("cpu1", 2),))
        c.write_file("needgpu.py", SCRIPT)
        j = c.submit(c.write_file("gpu.yaml", SPEC))

        t0 = c.wait_value(lambda: c.trial(j, 0), lambda h: h.get("state") == "unschedulable", 20,
                          "trial 0 to be unschedulable")
        self.assertRegex(t0.get("error", ""), r"(?i)gpu", "reason in the trial's error: %s" % t0)
        job = c.wait_value(lambda: c.job(j), lambda h: h.get("blocked"), 10,
                           "the job's blocked field")
        self.assertRegex(job["blocked"], r"(?i)gpu", job)
        self.assertEqual(job.get("state"), "running", job)
        self.assertGreaterEqual(int(job.get("unschedulable") or 0), 1, job)
        r = c.cgq("status", j)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("unschedulable", r.stdout, "cgq status shows the state:\n%s" % r.stdout)
        self.assertRegex(r.stdout, r"(?i)gpu", "cgq status shows the reason:\n%s" % r.stdout)
        ev = [e["type"] for e in c.events(j)]
        self.assertIn("trial.unschedulable", ev)

        c.start_worker("gpu1", cpus=2, gpus="fake:1")
        job = c.wait_job(j, 30)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "2", job)
        self.assertIn(job.get("unschedulable", "0"), ("0", ""), job)
        self.assertFalse(job.get("blocked"), "blocked is cleared: %s" % job)
        for t, h in c.trials(j).items():
            self.assertEqual(h.get("state"), "succeeded", h)
            self.assertEqual(h.get("node"), "gpu1", h)
            self.assertIn('"cvd": "0"', h.get("metrics", "").replace('":"', '": "'), h)


    def test_busy_fitting_node_unblocks(self):
        # Two blocked jobs; a one-GPU worker joins and takes job A's trial.
        # Job B is no longer unschedulable (a node fits it, it is only busy):
        # its blocked reason goes at once, not when A's trial ends.
        c = self.start_default(workers=(("cpu1", 2),))
        c.write_file("needgpu.py", SCRIPT.replace("0.2", "3"))
        a = c.submit(c.write_file("a.yaml", SPEC.replace("gpu-needed", "job-a")))
        b = c.submit(c.write_file("b.yaml", SPEC.replace("gpu-needed", "job-b")))
        for j in (a, b):
            c.wait_value(lambda: c.job(j), lambda h: h.get("blocked"), 10, "job %d blocked" % j)

        c.start_worker("gpu1", cpus=2, gpus="fake:1")
        running = c.wait_value(
            lambda: [j for j in (a, b) if c.job(j).get("running") == "1"], lambda r: len(r) == 1,
            10, "one trial to run on the GPU")
        other = b if running == [a] else a
        job = c.wait_value(lambda: c.job(other), lambda h: not h.get("blocked"), 2,
                           "job %d unblocked while the GPU is busy" % other)
        self.assertIn(job.get("unschedulable", "0"), ("0", ""), job)
        self.assertEqual(job.get("running"), "0", "the GPU is still taken: %s" % job)
        for j in (a, b):
            self.assertEqual(c.wait_job(j, 60).get("succeeded"), "2")

if __name__ == "__main__":
    main()
