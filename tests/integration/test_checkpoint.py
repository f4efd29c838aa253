#!/usr/bin/env python3
"""Checkpoints and resume (docs/architecture.md, "Checkpoints"), with a real
trial written against cgq.checkpoint():

- its worker killed (-9) at epoch 6 of 10: the trial resumes on another
  worker from the recorded checkpoint (sha256-checked on the way back), sees
  CGQ_RESUME_STEP and the files it wrote, and its reports before that step
  are not sent again;
- the latest checkpoint corrupted in the store (one byte): it is not used,
  the one before it is (keep: 2), and the trial's log says why;
- a worker killed in the middle of a seal (a big file; the .tmp it leaves,
  and a fake one pointed at by `latest`): never used, the last recorded
  checkpoint is; here with the worker's own store (its workdir), resumed by
  the same worker restarted.
"""

import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, CgqTestCase, main  # noqa: E402

CLIENTS = os.path.join(REPO, "clients", "python")

TRIAL = r'''
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import cgq

epochs, sleep_s = int(sys.argv[2]), float(sys.argv[3])
big_at = int(sys.argv[4]) if len(sys.argv) > 4 else 0
attempt = int(os.environ["CGQ_ATTEMPT"])
trial = os.environ["CGQ_TRIAL_ID"]

def blob(epoch):
    return bytes((epoch * 7 + i) % 256 for i in range(4096))

ck = cgq.checkpoint_dir()
start = cgq.resume_step()
state = blob_ok = None
sp, bp = os.path.join(ck, "state.json"), os.path.join(ck, "sub", "blob.bin")
if os.path.exists(sp):
    with open(sp) as f:
        state = json.load(f)
if os.path.exists(bp) and state:
    with open(bp, "rb") as f:
        blob_ok = f.read() == blob(state["epoch"])
with open(os.path.join(os.environ["CGQ_SPEC_DIR"], "runs-%s.jsonl" % trial), "a") as f:
    f.write(json.dumps({"attempt": attempt, "resume": os.environ.get("CGQ_RESUME_STEP"),
                        "resume_json": os.environ.get("CGQ_RESUME_JSON"),
                        "resume_step": start, "state": state, "blob_ok": blob_ok,
                        "files": sorted(os.listdir(ck)), "dir": ck}) + "\n")
if start is not None:
    # Already in the learning curve: the worker does not send it again.
    cgq.report(epoch=start, loss=9.0, replay=1)
first = (start or 0) + 1
for epoch in range(first, epochs + 1):
    time.sleep(sleep_s)
    cgq.report(epoch=epoch, loss=1.0 / epoch, attempt=attempt)
    os.makedirs(os.path.join(ck, "sub"), exist_ok=True)
    with open(sp, "w") as f:
        json.dump({"epoch": epoch, "attempt": attempt}, f)
    with open(bp, "wb") as f:
        f.write(blob(epoch))
    if epoch == big_at:
        with open(os.path.join(ck, "big.bin"), "wb") as f:
            for _ in range(96):
                f.write(os.urandom(1 << 20))
    cgq.checkpoint(epoch=epoch)
cgq.result(loss=1.0 / epochs, first=first, attempt=attempt)
'''

SPEC = '''name: ckpt-itest
space:
  x: {grid: [1]}
search: {algorithm: grid}
objective: {metric: loss, mode: min}
trial:
  command: python3 {spec_dir}/ckpt_trial.py %(clients)s %(epochs)d %(sleep)s %(big)d
  resources: {cpu: 1}
  timeout: 2m
%(ckpt)s
'''


def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class CheckpointTest(CgqTestCase):
    def setup_job(self, c, epochs=10, sleep="0.4", big=0, ckpt=""):
        c.write_file("ckpt_trial.py", TRIAL)
        return c.submit(c.write_file("ckpt.yaml", SPEC % dict(
            clients=CLIENTS, epochs=epochs, sleep=sleep, big=big, ckpt=ckpt)))

    def record(self, j, field="checkpoint"):
        text = self.cluster.trial(j, 0).get(field)
        return json.loads(text) if text else None

    def runs(self, c):
        with open(os.path.join(c.specdir, "runs-0.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()]

    def reports(self, c, j):
        return [json.loads(e["r"]) for e in c.redis.xrange("cgq:job:{%d}:reports:0" % j)]

    def test_killed_worker_resumes_elsewhere(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        c.start_worker("w1", cpus=1)
        store = os.path.join(c.specdir, "store")
        j = self.setup_job(c, ckpt="checkpoint: {store: '{spec_dir}/store'}")
        rec = c.wait_value(lambda: self.record(j), lambda r: r and r["step"]["epoch"] >= 6, 60,
                           "a checkpoint at epoch 6 recorded")
        c.workers["w1"].kill9()
        time.sleep(0.3)  # what w1 sent before it died is applied
        rec = self.record(j)
        at = rec["step"]["epoch"]
        self.assertEqual(rec["attempt"], 1, rec)
        self.assertEqual(rec["node"], "w1", rec)
        self.assertTrue(rec["path"].startswith(store + "/job-%d/trial-0/ckpt-1-" % j), rec)
        self.assertEqual(rec["sha256"], sha256_file(os.path.join(rec["path"], "manifest")), rec)
        self.assertEqual(json.loads(c.trial(j, 0)["checkpoints"]), [rec])
        c.start_worker("w2", cpus=1)

        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        t = c.trial(j, 0)
        self.assertEqual(t.get("state"), "succeeded", t)
        self.assertEqual(t.get("node"), "w2", t)
        self.assertEqual(t.get("attempt"), "2", t)
        self.assertEqual(json.loads(t["metrics"])["first"], at + 1, t)

        runs = self.runs(c)
        self.assertEqual([r["attempt"] for r in runs], [1, 2], runs)
        self.assertEqual(runs[0]["resume"], None, runs[0])
        self.assertEqual(runs[0]["files"], [], "a first start gets an empty directory")
        second = runs[1]
        self.assertEqual(second["resume"], str(at), second)
        self.assertEqual(json.loads(second["resume_json"]), {"epoch": at}, second)
        self.assertEqual(second["state"], {"epoch": at, "attempt": 1}, second)
        self.assertTrue(second["blob_ok"], second)
        self.assertEqual(second["files"], ["state.json", "sub"], second)
        self.assertTrue("/w2/" in second["dir"], second)
        # The restore said so in the trial's log (sha256 checked).
        log = os.path.join(c.tmp, "w2", "job-%d" % j, "trial-0", "attempt-2", "stderr.log")
        with open(log) as f:
            text = f.read()
        self.assertIn("cgq: resumed from checkpoint ckpt-1-%s" % rec["n"], text)

        # The learning curve: every epoch once; the replayed one was not sent.
        reps = self.reports(c, j)
        epochs = [r["epoch"] for r in reps]
        self.assertFalse([r for r in reps if r.get("replay")], reps)
        for e in range(1, 11):
            want = 1 if e <= at or e > at + 3 else None
            if want:
                self.assertEqual(epochs.count(e), 1, "epoch %d in %s" % (e, epochs))
        self.assertEqual(epochs[-1], 10, epochs)

        last = self.record(j)
        self.assertEqual((last["attempt"], last["step"]), (2, {"epoch": 10}), last)
        self.assertEqual(last["node"], "w2", last)
        self.assertEqual(last["sha256"], sha256_file(os.path.join(last["path"], "manifest")))
        # keep: 1: once the last one is acked, older ones are gone from the store.
        tdir = os.path.join(store, "job-%d" % j, "trial-0")
        c.wait_value(lambda: sorted(n for n in os.listdir(tdir) if n.startswith("ckpt-")),
                     lambda names: names == ["ckpt-2-%d" % last["n"]], 20,
                     "the store to hold only the last checkpoint")
        self.assertEqual(os.readlink(os.path.join(tdir, "latest")), "ckpt-2-%d" % last["n"])
        self.assertEqual(int(c.job(j).get("checkpoint_bytes", "0")), last["size"])
        self.assertEqual(last["files"], 2)
        r = c.cgq("status", str(j))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("checkpoints", r.stdout)

    def test_corrupt_latest_is_not_used(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        shared = os.path.join(c.tmp, "shared-store")
        c.start_worker("w1", cpus=1, extra=("--checkpoint-store", shared))
        j = self.setup_job(c, ckpt="checkpoint: {keep: 2}")
        c.wait_value(lambda: self.record(j), lambda r: r and r["step"]["epoch"] >= 4, 60,
                     "a checkpoint at epoch 4 recorded")
        c.workers["w1"].kill9()
        time.sleep(0.3)
        kept = json.loads(c.trial(j, 0)["checkpoints"])
        self.assertEqual(len(kept), 2, kept)
        newest, older = kept
        self.assertEqual(newest["step"]["epoch"], older["step"]["epoch"] + 1, kept)
        self.assertTrue(newest["path"].startswith(shared + "/"), newest)
        # One byte of the newest's blob flipped in the store.
        blob = os.path.join(newest["path"], "files", "sub", "blob.bin")
        with open(blob, "r+b") as f:
            b = f.read(1)
            f.seek(0)
            f.write(bytes([b[0] ^ 0x01]))
        c.start_worker("w2", cpus=1, extra=("--checkpoint-store", shared))

        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        runs = self.runs(c)
        self.assertEqual(len(runs), 2, runs)
        self.assertEqual(runs[1]["resume_step"], older["step"]["epoch"], runs[1])
        self.assertEqual(runs[1]["state"]["epoch"], older["step"]["epoch"], runs[1])
        self.assertTrue(runs[1]["blob_ok"], runs[1])
        log = os.path.join(c.tmp, "w2", "job-%d" % j, "trial-0", "attempt-2", "stderr.log")
        with open(log) as f:
            text = f.read()
        self.assertIn("checkpoint ckpt-1-%d" % newest["n"], text)
        self.assertIn("not used: file sub/blob.bin", text)
        self.assertIn("resumed from checkpoint ckpt-1-%d" % older["n"], text)
        t = c.trial(j, 0)
        self.assertEqual(json.loads(t["metrics"])["first"], older["step"]["epoch"] + 1, t)

    def test_half_written_is_never_used(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        c.start_worker("w1", cpus=1)
        # Epoch 5 seals 96 MiB: the worker is killed while it writes them.
        j = self.setup_job(c, sleep="0.3", big=5)
        store = os.path.join(c.tmp, "w1", "checkpoints", "job-%d" % j, "trial-0")
        tmp = os.path.join(store, "ckpt-1-5.tmp")
        caught = False
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rec = self.record(j)
            if os.path.isdir(tmp):
                caught = True
                break
            if rec and rec["step"]["epoch"] >= 5:
                break
            time.sleep(0.002)
        c.workers["w1"].kill9()
        time.sleep(0.3)
        rec = self.record(j)
        self.assertIsNotNone(rec)
        if caught:
            self.assertEqual(rec["step"]["epoch"], 4, "killed mid-seal of epoch 5: %s" % rec)
        # Whatever it reached, a half checkpoint as it would look, which
        # `latest` points at: neither is the recorded one, neither is used.
        fake = os.path.join(store, "ckpt-1-99.tmp")
        os.makedirs(os.path.join(fake, "files"))
        with open(os.path.join(fake, "files", "state.json"), "w") as f:
            json.dump({"epoch": 99, "attempt": 1}, f)
        os.unlink(os.path.join(store, "latest"))
        os.symlink("ckpt-1-99.tmp", os.path.join(store, "latest"))
        # The same worker again (its store is its workdir's): resumes there.
        c.start_worker("w1", cpus=1)

        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        runs = self.runs(c)
        self.assertEqual(len(runs), 2, runs)
        self.assertEqual(runs[1]["resume_step"], rec["step"]["epoch"], (runs[1], rec, caught))
        self.assertEqual(runs[1]["state"], {"epoch": rec["step"]["epoch"], "attempt": 1}, runs[1])
        sys.stderr.write("(killed mid-seal: %s; resumed at epoch %d)\n" % (caught, rec["step"]["epoch"]))


if __name__ == "__main__":
    main()
