#!/usr/bin/env python3
"""Checkpoints that must not count, and when an attempt resumes
(docs/architecture.md, "Checkpoints"):

- two attempts of one trial racing: the worker of the first one (given up
  on) comes back and announces a checkpoint of its attempt while the second
  attempt runs elsewhere: refused (CheckpointAck recorded=false, and why),
  only the current attempt's checkpoints are recorded;
- a checkpoint store that cannot be written: the trial fails with an error
  that names the store and why, it is not lost;
- a timeout: with checkpoint.resume: [.., timeout] the retry resumes from
  the last checkpoint; with the default (lost, failed) it starts afresh.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, CgqTestCase, ZmtpPeer, main, pb_bytes,  # noqa: E402
                     pb_envelope, pb_hello, pb_int, pb_task)
from test_checkpoint import SPEC, TRIAL  # noqa: E402

CLIENTS = os.path.join(REPO, "clients", "python")


def pb_fields(data):
    """The fields of one protobuf message: {number: [value, ...]} (varints
    as ints, length-delimited as bytes)."""
    out, i = {}, 0
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(data, i)
        elif wire == 2:
            n, i = _varint(data, i)
            v, i = data[i:i + n], i + n
        elif wire == 1:
            v, i = data[i:i + 8], i + 8
        elif wire == 5:
            v, i = data[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wire)
        out.setdefault(field, []).append(v)
    return out


def _varint(data, i):
    n = shift = 0
    while True:
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


class CheckpointRefuseTest(CgqTestCase):
    def job(self, c, name="ckpt.yaml", epochs=10, sleep="0.4", ckpt="", timeout="2m", retries=0):
        c.write_file("ckpt_trial.py", TRIAL)
        spec = SPEC % dict(clients=CLIENTS, epochs=epochs, sleep=sleep, big=0, ckpt=ckpt)
        spec = spec.replace("timeout: 2m", "timeout: %s\n  retries: %d" % (timeout, retries))
        return c.submit(c.write_file(name, spec))

    def record(self, j):
        text = self.cluster.trial(j, 0).get("checkpoint")
        return json.loads(text) if text else None

    def test_stale_attempt_is_refused(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "100ms"))
        c.start_worker("w1", cpus=1)
        j = self.job(c, ckpt="checkpoint: {store: '{spec_dir}/store'}")
        first = c.wait_value(lambda: self.record(j), lambda r: r and r["step"]["epoch"] >= 2, 60,
                             "a checkpoint of attempt 1")
        c.workers["w1"].kill9()
        c.start_worker("w2", cpus=1)
        cur = c.wait_value(lambda: self.record(j), lambda r: r and r["attempt"] == 2, 60,
                           "a checkpoint of attempt 2")
        self.assertEqual(c.trial(j, 0).get("attempt"), "2")

        # w1 again, as a partitioned worker that still runs attempt 1 would
        # be: it says Hello, then announces attempt 1's next checkpoint.
        port = int(c.nodes_ep.rsplit(":", 1)[1])
        ghost = ZmtpPeer("127.0.0.1", port, identity=b"w1", timeout=10)
        try:
            ghost.send([pb_hello("w1")])
            ckpt = (pb_bytes(1, pb_task(j, 0, 1)) + pb_int(2, first["n"] + 1) +
                    pb_bytes(3, '{"epoch":99}') + pb_int(4, 10) + pb_int(5, 1) +
                    pb_bytes(6, "ab" * 32) + pb_bytes(7, first["path"] + "x") +
                    pb_bytes(8, "partitioned"))
            ack = None
            deadline = time.monotonic() + 15
            sent = False
            while ack is None and time.monotonic() < deadline:
                env = pb_fields(ghost.recv()[-1])
                if 11 in env and not sent:  # Welcome
                    ghost.send([pb_envelope(21, ckpt)])
                    sent = True
                if 22 in env:
                    ack = pb_fields(env[22][0])
            self.assertIsNotNone(ack, "no CheckpointAck for the stale attempt's checkpoint")
        finally:
            ghost.close(0)
        self.assertEqual(ack.get(3, [0])[0], 0, "recorded must be false: %s" % ack)
        reason = ack[4][0].decode()
        self.assertIn("attempt 1 is not the trial's current attempt (2)", reason)
        task = pb_fields(ack[1][0])
        self.assertEqual((task[1][0], task.get(2, [0])[0], task[4][0]), (j, 0, 1))
        # Nothing of it was recorded; attempt 2 goes on recording its own.
        now = self.record(j)
        self.assertEqual(now["attempt"], 2, now)
        self.assertNotEqual(now["step"], {"epoch": 99}, now)
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        last = self.record(j)
        self.assertEqual((last["attempt"], last["step"]), (2, {"epoch": 10}), last)
        kept = json.loads(c.trial(j, 0)["checkpoints"])
        self.assertEqual([k["attempt"] for k in kept], [2], kept)
        self.assertGreaterEqual(last["n"], cur["n"])

    def test_unwritable_store_fails_the_trial(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.start_worker("w1", cpus=1)
        # A store below a regular file: no one can write there, root included.
        c.write_file("afile", "not a directory\n")
        j = self.job(c, epochs=3, sleep="0.1", ckpt="checkpoint: {store: '{spec_dir}/afile/ckpt'}")
        job = c.wait_job(j, 60)
        t = c.trial(j, 0)
        self.assertEqual(t.get("state"), "failed", t)
        err = t.get("error", "")
        self.assertIn("cannot seal checkpoint 1 (step {\"epoch\":1}) into the checkpoint store %s"
                      % os.path.join(c.specdir, "afile", "ckpt"), err)
        self.assertIn("Not a directory", err)
        self.assertIn("set checkpoint.store", err)
        self.assertNotIn("checkpoint", {k for k in t if k == "checkpoint"})
        ev = [e["type"] for e in c.events(j) if e.get("trial") == "0"]
        self.assertNotIn("trial.lost", ev)
        self.assertIn("trial.failed", ev)
        self.assertEqual(job.get("failed"), "1", job)

    def test_timeout_resumes_when_asked(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.start_worker("w1", cpus=2)
        c.write_file("ckpt_trial.py", TRIAL)
        jobs = {}
        for name, resume in (("yes", "[lost, failed, timeout]"), ("no", None)):
            d = os.path.join(c.specdir, name)
            os.makedirs(d)
            spec = SPEC % dict(clients=CLIENTS, epochs=6, sleep="0.5", big=0,
                               ckpt="checkpoint: {resume: %s}" % resume if resume else "")
            spec = spec.replace("{spec_dir}/ckpt_trial.py", c.specdir + "/ckpt_trial.py")
            spec = spec.replace("timeout: 2m", "timeout: 2s\n  retries: 1")
            path = os.path.join(d, "t.yaml")
            with open(path, "w") as f:
                f.write(spec)
            jobs[name] = (c.submit(path), d)
        for name, (j, d) in jobs.items():
            c.wait_job(j, 60)
        runs = {}
        for name, (j, d) in jobs.items():
            with open(os.path.join(d, "runs-0.jsonl")) as f:
                runs[name] = [json.loads(x) for x in f if x.strip()]
        yes, no = runs["yes"], runs["no"]
        self.assertEqual(len(yes), 2, yes)
        self.assertIsNotNone(yes[1]["resume_step"], yes)
        self.assertGreaterEqual(yes[1]["resume_step"], 2, yes)
        t = c.trial(jobs["yes"][0], 0)
        self.assertEqual(t.get("state"), "succeeded", t)
        self.assertEqual(len(no), 2, no)
        self.assertIsNone(no[1]["resume_step"], no)
        self.assertEqual(no[1]["files"], [], no)
        t = c.trial(jobs["no"][0], 0)
        self.assertEqual(t.get("state"), "failed", t)
        self.assertIn("timed out", t.get("error", ""))
        # Attempt 1's were let go when it timed out; attempt 2 recorded its own.
        kept = json.loads(t.get("checkpoints") or "[]")
        self.assertEqual({k["attempt"] for k in kept}, {2}, kept)


if __name__ == "__main__":
    main()
