#!/usr/bin/env python3
"""Checkpoints on a real GPU: a PyTorch trial trains a small network on CUDA,
saves its model and optimizer (torch.save) into $CGQ_CHECKPOINT_DIR each
epoch and announces it with cgq.checkpoint(); its worker is killed (-9) at
epoch 5 of 12. The trial must resume on a second worker (the same GPU,
offered by `--gpus auto`) from the recorded checkpoint: its first epoch is
the checkpoint's + 1, the weights it loads give the loss the first attempt
reported at that epoch (nothing retrained from scratch), CUDA sees exactly
one device in each attempt, and the finished trial's loss is within a
tolerance of an uninterrupted run of the same seed (also run here).

The rest of the suite runs on fake GPUs; this test exits 77 (skipped, with
the reason) where nvidia-smi lists no GPU or torch cannot use CUDA.
CGQ_GPU_TEST_ON_CPU=1 runs the same steps on the CPU (no GPU asked for, no
CUDA checks), to try the test itself where there is no GPU.

  python3 tests/gpu/test_checkpoint_gpu.py     (CGQ_BIN_DIR: the binaries)
"""

import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import REPO, CgqTestCase  # noqa: E402

CLIENTS = os.path.join(REPO, "clients", "python")


ON_CPU = os.environ.get("CGQ_GPU_TEST_ON_CPU") == "1"


def _skip_reason():
    if ON_CPU:
        probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True)
        return None if probe.returncode == 0 else "no torch for the CPU run"
    smi = shutil.which("nvidia-smi")
    if not smi:
        return "no nvidia-smi on PATH (no GPU here)"
    out = subprocess.run([smi, "-L"], capture_output=True, text=True)
    if not any(line.startswith("GPU ") for line in out.stdout.splitlines()):
        return "nvidia-smi lists no GPU"
    probe = subprocess.run([sys.executable, "-c", "import torch, sys; "
                            "sys.exit(0 if torch.cuda.is_available() else 3)"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return "torch cannot use CUDA here (%s)" % (probe.stderr.strip().splitlines() or
                                                  ["no torch"])[-1]
    for b in ("redis-server",):
        if not shutil.which(b):
            return "%s not on PATH" % b
    return None


TRIAL = r'''
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import cgq
import torch

epochs, sleep_s, log = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
attempt = int(os.environ["CGQ_ATTEMPT"])
on_cpu = sys.argv[5] == "cpu"
if not on_cpu:
    assert torch.cuda.device_count() == 1, torch.cuda.device_count()
dev = torch.device("cpu" if on_cpu else "cuda:0")
torch.manual_seed(7)
g = torch.Generator().manual_seed(11)
x = torch.randn(4096, 64, generator=g).to(dev)
w_true = torch.randn(64, 1, generator=g).to(dev)
y = torch.tanh(x @ w_true) + 0.01 * torch.randn(4096, 1, generator=g).to(dev)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                            torch.nn.Linear(128, 1)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
ck = cgq.checkpoint_dir()
start = cgq.resume_step()
loaded_loss = None
if start is not None:
    state = torch.load(os.path.join(ck, "state.pt"), map_location=dev)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    assert state["epoch"] == start, (state["epoch"], start)
    with torch.no_grad():
        loaded_loss = float(torch.nn.functional.mse_loss(model(x), y))
with open(log, "a") as f:
    f.write(json.dumps({"attempt": attempt, "start": start, "loaded_loss": loaded_loss,
                        "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                        "gpu": "cpu" if on_cpu else torch.cuda.get_device_name(0)}) + "\n")
loss = None
for epoch in range((start or 0) + 1, epochs + 1):
    for _ in range(50):
        opt.zero_grad()
        l = torch.nn.functional.mse_loss(model(x), y)
        l.backward()
        opt.step()
    with torch.no_grad():
        loss = float(torch.nn.functional.mse_loss(model(x), y))
    cgq.report(epoch=epoch, loss=loss, attempt=attempt)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch},
               os.path.join(ck, "state.pt"))
    cgq.checkpoint(epoch=epoch)
    time.sleep(sleep_s)
cgq.result(loss=loss, attempt=attempt, first=(start or 0) + 1)
'''

SPEC = '''name: ckpt-gpu
space:
  run: {grid: [%(runs)s]}
search: {algorithm: grid}
objective: {metric: loss, mode: min}
trial:
  command: %(python)s {spec_dir}/trial.py %(clients)s 12 %(sleep)s {spec_dir}/runs-{run}.jsonl %(dev)s
  resources: {cpu: 1%(gpu)s}
  timeout: 5m
checkpoint: {store: '{spec_dir}/store'}
'''


GPU = "" if ON_CPU else ", gpu: 0.5"
GPUS = "none" if ON_CPU else "auto"
ARGS = dict(python=sys.executable, clients=CLIENTS, gpu=GPU, dev="cpu" if ON_CPU else "cuda")


class CheckpointGpuTest(CgqTestCase):
    def reports(self, j, t):
        return [json.loads(e["r"]) for e in self.cluster.redis.xrange(
            "cgq:job:{%d}:reports:%d" % (j, t))]

    def runs(self, name):
        with open(os.path.join(self.cluster.specdir, "runs-%s.jsonl" % name)) as f:
            return [json.loads(line) for line in f if line.strip()]

    def test_a_cuda_trial_resumes_from_its_checkpoint_after_a_worker_kill(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        c.write_file("trial.py", TRIAL)
        # The reference: the same trial, uninterrupted.
        c.start_worker("ref", cpus=2, gpus=GPUS)
        ref = c.submit(c.write_file("ref.yaml", SPEC % dict(runs="ref", sleep="0", **ARGS)))
        job = c.wait_job(ref, 240)
        self.assertEqual(job.get("state"), "finished", job)
        ref_loss = json.loads(c.trial(ref, 0)["metrics"])["loss"]
        ref_worker = c.workers["ref"]
        self.assertIsNone(ref_worker.stop())
        self.assertEqual(ref_worker.stopped_rc, 0)
        ref_worker.expect_exit = None  # stopped here, on purpose

        c.start_worker("w1", cpus=2, gpus=GPUS)
        j = c.submit(c.write_file("kill.yaml", SPEC % dict(runs="kill", sleep="0.5", **ARGS)))
        rec = c.wait_value(lambda: c.trial(j, 0).get("checkpoint"),
                           lambda r: r and json.loads(r)["step"]["epoch"] >= 5, 180,
                           "a checkpoint at epoch 5 recorded")
        c.workers["w1"].kill9()
        time.sleep(0.5)
        rec = json.loads(c.trial(j, 0)["checkpoint"])
        at = rec["step"]["epoch"]
        before = {r["epoch"]: r["loss"] for r in self.reports(j, 0) if r.get("attempt") == 1}
        c.start_worker("w2", cpus=2, gpus=GPUS)
        job = c.wait_job(j, 240)
        self.assertEqual(job.get("state"), "finished", job)
        t = c.trial(j, 0)
        self.assertEqual((t.get("state"), t.get("node"), t.get("attempt")),
                         ("succeeded", "w2", "2"), t)
        metrics = json.loads(t["metrics"])
        self.assertEqual(metrics["first"], at + 1, metrics)
        runs = self.runs("kill")
        self.assertEqual([r["attempt"] for r in runs], [1, 2], runs)
        self.assertEqual(runs[1]["start"], at, runs)
        for r in runs:
            if not ON_CPU:
                self.assertEqual(len((r["visible"] or "").split(",")), 1, r)
        # The weights it loaded are the ones of epoch `at`: the loss it
        # measures on them is the loss attempt 1 reported there (to float
        # noise), not a fresh network's.
        self.assertIn(at, before, before)
        self.assertAlmostEqual(runs[1]["loaded_loss"], before[at],
                               delta=1e-4 + 1e-3 * before[at], msg=(runs, before))
        self.assertLess(runs[1]["loaded_loss"], before[1], (runs, before))
        # Same seed, same data: the resumed run ends where the reference does
        # (CUDA's reductions are not bit-exact: a tolerance).
        self.assertAlmostEqual(metrics["loss"], ref_loss, delta=0.05 * ref_loss + 1e-4,
                               msg=(metrics, ref_loss))
        with open(os.path.join(c.workers["w2"].workdir, "job-%d" % j, "trial-0", "attempt-2",
                               "stderr.log")) as f:
            log = f.read()
        self.assertIn("resumed from checkpoint", log)
        print("checkpoint_gpu: %s; killed at epoch %d (loss %.5f), resumed at %d loading "
              "loss %.5f; final %.5f vs uninterrupted %.5f"
              % (runs[0]["gpu"], max(before), before[max(before)], at, runs[1]["loaded_loss"],
                 metrics["loss"], ref_loss))


if __name__ == "__main__":
    why = _skip_reason()
    if why:
        print("checkpoint_gpu: skipped: %s" % why)
        sys.exit(77)
    import unittest
    unittest.main()
