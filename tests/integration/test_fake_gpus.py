#!/usr/bin/env python3
"""h. Fractional GPUs on a worker with --gpus fake:2: trials asking for half a
GPU run at most 4 at once, two per GPU, each seeing one GPU index."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, main  # noqa: E402

SCRIPT = r'''
import json, os, time
t0 = time.time()
time.sleep(1.0)
t1 = time.time()
rec = {"trial": int(os.environ["CGQ_TRIAL_ID"]), "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
       "start": t0, "end": t1}
with open(os.path.join(os.environ["CGQ_SPEC_DIR"], "rec-%d.json" % rec["trial"]), "w") as f:
    json.dump(rec, f)
os.write(3, b'{"score": 1}\n')
'''

SPEC = '''name: gpu-itest
space:
  i: {grid: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/gpu.py
  resources: {gpu: 0.5, cpu: 1}
'''


def peak(intervals):
    """Largest number of [start, end) intervals that overlap at one time."""
    points = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals],
                    key=lambda p: (p[0], p[1]))
    cur = best = 0
    for _, d in points:
        cur += d
        best = max(best, cur)
    return best


def gpu_count(field):
    """The node hash's gpus field: a JSON list, a count, or "0,1"."""
    field = (field or "").strip()
    try:
        v = json.loads(field)
    except ValueError:
        return len([x for x in field.split(",") if x.strip()])
    return len(v) if isinstance(v, list) else v


class FakeGpuTest(CgqTestCase):
    def test_half_gpu_trials(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.start_worker("g1", cpus=8, gpus="fake:2")
        node = c.redis.hgetall("cgq:node:g1")
        self.assertEqual(gpu_count(node.get("gpus")), 2, "node hash gpus: %s" % node)

        c.write_file("gpu.py", SCRIPT)
        j = c.submit(c.write_file("gpu.yaml", SPEC))
        job = c.wait_job(j, 90)
        self.assertEqual(job.get("succeeded"), "12", job)

        recs = []
        for t in range(12):
            with open(os.path.join(c.specdir, "rec-%d.json" % t)) as f:
                recs.append(json.load(f))
        trials = c.trials(j)
        for r in recs:
            self.assertIn(r["cvd"], ("0", "1"), "CUDA_VISIBLE_DEVICES of trial %d: %r" % (r["trial"], r["cvd"]))
            h = trials[r["trial"]]
            self.assertEqual(str(h.get("gpus")).strip("[]\" "), r["cvd"],
                             "trial hash gpus vs the env: %s" % h)
        total = peak([(r["start"], r["end"]) for r in recs])
        self.assertEqual(total, 4, "peak concurrent trials (2 GPUs x 2 halves)")
        for g in ("0", "1"):
            ivs = [(r["start"], r["end"]) for r in recs if r["cvd"] == g]
            self.assertEqual(peak(ivs), 2, "peak concurrent trials on GPU %s" % g)


if __name__ == "__main__":
    main()
