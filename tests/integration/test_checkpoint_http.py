#!/usr/bin/env python3
"""Checkpoints in an HTTP store (docs/architecture.md, "Checkpoints"), a
real HTTP server (tests/support/http_store.py) on a loopback port:

- a trial killed with its worker resumes on another worker from the HTTP
  store, the manifest's sha256 checked against the record and every file's
  as it streams; every request carried the bearer token (from a file named
  in the worker's config), which no log holds; files are PUT before their
  manifest;
- a GET body corrupted in flight (one byte) is never used: the checkpoint
  before it is;
- a full store (507): the trial fails with a clear reason and is retried,
  not lost;
- an unreachable store on resume: the trial starts afresh and its
  stderr.log says why.
"""

import hashlib
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
TOKEN = "s3cr3t-token-4711"


class CheckpointHttpBase(CgqTestCase):
    """A store with a token, and the helpers (the tests are below and in
    test_checkpoint_http_faults.py)."""

    def setUp(self):
        super().setUp()
        self.store = HttpStore(os.path.join(self.cluster.tmp, "http-store"), token=TOKEN).start()
        self.addCleanup(self.store.stop)
        self.tokfile = self.cluster.write_file("token", TOKEN + "\n", mode=0o600)

    def worker(self, wid, extra=()):
        self.cluster.start_worker(wid, cpus=1,
                                  extra=("--checkpoint-token-file", self.tokfile) + tuple(extra))

    def job(self, epochs=10, sleep="0.4", keep=1, retries=0, url=None):
        c = self.cluster
        c.write_file("ckpt_trial.py", TRIAL)
        if url == "":  # the workers' default store
            ckpt = "checkpoint: {keep: %d}" % keep
        else:
            ckpt = "checkpoint: {store: '%s', keep: %d}" % (url or self.store.url + "/ck/", keep)
        spec = SPEC % dict(clients=CLIENTS, epochs=epochs, sleep=sleep, big=0, ckpt=ckpt)
        spec = spec.replace("timeout: 2m", "timeout: 2m\n  retries: %d" % retries)
        return c.submit(c.write_file("ckpt.yaml", spec))

    def record(self, j, field="checkpoint"):
        text = self.cluster.trial(j, 0).get(field)
        return json.loads(text) if text else None

    def runs(self):
        with open(os.path.join(self.cluster.specdir, "runs-0.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()]

    def local(self, url):
        """Where the store keeps what url names."""
        self.assertTrue(url.startswith(self.store.url + "/"), url)
        return os.path.join(self.store.root, url[len(self.store.url) + 1:])

    def trial_log(self, j, wid, attempt):
        p = os.path.join(self.cluster.tmp, wid, "job-%d" % j, "trial-0", "attempt-%d" % attempt,
                         "stderr.log")
        with open(p) as f:
            return f.read()

    def assert_no_token_in_logs(self):
        for root, _, files in os.walk(self.cluster.tmp):
            if "http-store" in root:
                continue
            for name in files:
                if name.endswith(".log"):
                    with open(os.path.join(root, name), "rb") as f:
                        self.assertNotIn(TOKEN.encode(), f.read(), os.path.join(root, name))


class CheckpointHttpTest(CheckpointHttpBase):
    def test_killed_worker_resumes_from_http_store(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        self.worker("w1")
        j = self.job()
        c.wait_value(lambda: self.record(j), lambda r: r and r["step"]["epoch"] >= 6, 60,
                     "a checkpoint at epoch 6 recorded")
        c.workers["w1"].kill9()
        time.sleep(0.3)
        rec = self.record(j)
        at = rec["step"]["epoch"]
        self.assertTrue(rec["path"].startswith(
            self.store.url + "/ck/job-%d/trial-0/ckpt-1-" % j), rec)
        with open(os.path.join(self.local(rec["path"]), "manifest"), "rb") as f:
            self.assertEqual(rec["sha256"], hashlib.sha256(f.read()).hexdigest(), rec)
        self.worker("w2")

        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        t = c.trial(j, 0)
        self.assertEqual((t.get("node"), t.get("attempt")), ("w2", "2"), t)
        self.assertEqual(json.loads(t["metrics"])["first"], at + 1, t)
        runs = self.runs()
        self.assertEqual([r["attempt"] for r in runs], [1, 2], runs)
        self.assertEqual(runs[1]["state"], {"epoch": at, "attempt": 1}, runs[1])
        self.assertTrue(runs[1]["blob_ok"], runs[1])
        self.assertIn("cgq: resumed from checkpoint ckpt-1-%d" % rec["n"],
                      self.trial_log(j, "w2", 2))

        # Every request had the token; no log holds it.
        self.assertTrue(self.store.requests)
        self.assertEqual([r for r in self.store.requests if not r[3]], [])
        self.assert_no_token_in_logs()
        # Each checkpoint's files went before its manifest, and the restore
        # read the manifest before the files.
        puts = [r[1] for r in self.store.requests if r[0] == "PUT"]
        name = "ckpt-1-%d" % rec["n"]
        mine = [p for p in puts if "/%s/" % name in p]
        self.assertTrue(mine[-1].endswith("/manifest"), mine)
        self.assertEqual(len([p for p in mine if p.endswith("/manifest")]), 1, mine)
        gets = [r[1] for r in self.store.requests if r[0] == "GET" and "/%s/" % name in r[1]]
        self.assertTrue(gets[0].endswith("/manifest"), gets)
        # keep: 1: attempt 2's older checkpoints were deleted, its last is there.
        last = self.record(j)
        self.assertEqual((last["attempt"], last["step"]), (2, {"epoch": 10}), last)
        tdir = os.path.join(self.store.root, "ck", "job-%d" % j, "trial-0")
        c.wait_value(lambda: sorted(n for n in os.listdir(tdir) if n.startswith("ckpt-2-")),
                     lambda names: names == ["ckpt-2-%d" % last["n"]], 20,
                     "only the last of attempt 2 kept")
        # The one attempt 2 resumed from (an HTTP store is not listed: the
        # worker deletes it by name once the coordinator no longer names it).
        c.wait_value(lambda: os.path.exists(os.path.join(tdir, name, "manifest")),
                     lambda there: not there, 20, "the inherited %s deleted" % name)
        self.assertFalse(os.path.exists(os.path.join(tdir, name, "files", "state.json")))
        self.assertEqual(int(c.job(j).get("checkpoint_bytes", "0")), last["size"])

    def test_corrupted_body_is_never_used(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        # Here the store is the workers' default (--checkpoint-store URL).
        default = ("--checkpoint-store", self.store.url + "/dflt")
        self.worker("w1", default)
        j = self.job(keep=2, url="")
        c.wait_value(lambda: self.record(j), lambda r: r and r["step"]["epoch"] >= 4, 60,
                     "a checkpoint at epoch 4 recorded")
        c.workers["w1"].kill9()
        time.sleep(0.3)
        newest, older = json.loads(c.trial(j, 0)["checkpoints"])
        self.assertTrue(newest["path"].startswith(self.store.url + "/dflt/job-%d/" % j), newest)
        # The store is intact; what it sends of the newest's blob is not.
        self.store.corrupt = "/ckpt-1-%d/files/sub/blob.bin" % newest["n"]
        self.worker("w2", default)
        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        runs = self.runs()
        self.assertEqual(len(runs), 2, runs)
        self.assertEqual(runs[1]["resume_step"], older["step"]["epoch"], runs[1])
        self.assertTrue(runs[1]["blob_ok"], runs[1])
        text = self.trial_log(j, "w2", 2)
        self.assertIn("checkpoint ckpt-1-%d" % newest["n"], text)
        self.assertIn("not used: file sub/blob.bin", text)
        self.assertIn("resumed from checkpoint ckpt-1-%d" % older["n"], text)

    def test_full_store_fails_the_trial_and_it_is_retried(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        self.worker("w1")
        self.store.full = True
        j = self.job(epochs=3, sleep="0.1", retries=1)
        job = c.wait_job(j, 60)
        t = c.trial(j, 0)
        self.assertEqual(t.get("state"), "failed", t)
        self.assertEqual(t.get("attempt"), "2", "retried once: %s" % t)
        err = t.get("error", "")
        self.assertIn("cannot seal checkpoint 1 (step {\"epoch\":1}) into the checkpoint store "
                      "%s/ck/" % self.store.url, err)
        self.assertIn("HTTP 507", err)
        self.assertIn("the checkpoint store is full", err)
        ev = [e["type"] for e in c.events(j) if e.get("trial") == "0"]
        self.assertNotIn("trial.lost", ev)
        self.assertIn("trial.failed", ev)
        self.assertEqual(job.get("failed"), "1", job)
        # 507 is not retried by the worker: one PUT per attempt's first file.
        puts = [r for r in self.store.requests if r[0] == "PUT"]
        self.assertEqual([r[2] for r in puts], [507, 507], puts)

    def test_second_kill_resumes_from_the_first_resume(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        self.worker("w1")
        j = self.job(epochs=14, sleep="0.4")
        first = c.wait_value(lambda: self.record(j), lambda r: r and r["step"]["epoch"] >= 3,
                             60, "a checkpoint of attempt 1")
        c.workers["w1"].kill9()
        time.sleep(0.3)
        first = self.record(j)
        self.worker("w2")
        c.wait_value(lambda: self.record(j),
                     lambda r: r and r["attempt"] == 2 and r["step"]["epoch"] >= 8,
                     60, "a checkpoint of attempt 2 at epoch 8")
        c.workers["w2"].kill9()  # the second kill
        time.sleep(0.3)
        second = self.record(j)
        self.worker("w3")
        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        t = c.trial(j, 0)
        self.assertEqual((t.get("node"), t.get("attempt")), ("w3", "3"), t)
        runs = self.runs()
        self.assertEqual([r["attempt"] for r in runs], [1, 2, 3], runs)
        self.assertEqual(runs[1]["resume_step"], first["step"]["epoch"], runs[1])
        self.assertEqual(runs[2]["resume_step"], second["step"]["epoch"], runs[2])
        self.assertEqual(runs[2]["state"], {"epoch": second["step"]["epoch"], "attempt": 2})
        self.assertTrue(runs[2]["blob_ok"], runs[2])
        self.assertIn("cgq: resumed from checkpoint ckpt-2-%d" % second["n"],
                      self.trial_log(j, "w3", 3))
        # Both checkpoints resumed from are deleted once no longer named.
        tdir = os.path.join(self.store.root, "ck", "job-%d" % j, "trial-0")
        for rec in (first, second):
            name = "ckpt-%d-%d" % (rec["attempt"], rec["n"])
            c.wait_value(lambda: os.path.exists(os.path.join(tdir, name, "manifest")),
                         lambda there: not there, 20, "%s deleted" % name)

    def test_unreachable_store_on_resume_starts_afresh(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        self.worker("w1")
        j = self.job(epochs=6, sleep="0.6", retries=2)
        c.wait_value(lambda: self.record(j), lambda r: r and r["step"]["epoch"] >= 2, 60,
                     "a checkpoint at epoch 2 recorded")
        c.workers["w1"].kill9()
        rec = self.record(j)
        port = self.store.port
        self.store.stop()
        self.worker("w2")
        c.wait_value(lambda: len(self.runs()), lambda n: n >= 2, 60, "attempt 2 started")
        second = self.runs()[1]
        self.assertIsNone(second["resume_step"], second)
        self.assertEqual(second["files"], [], second)
        text = self.trial_log(j, "w2", 2)
        self.assertIn("checkpoint ckpt-1-%d" % rec["n"], text)
        self.assertIn("not used: GET %s/manifest" % rec["path"], text)
        self.assertIn("the checkpoint store is unreachable", text)
        # The store back on its port: the trial goes on to the end (attempt 2,
        # or 3 if 2 sealed while it was down), never lost.
        self.store = HttpStore(self.store.root, port=port, token=TOKEN).start()
        self.addCleanup(self.store.stop)
        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(c.trial(j, 0).get("state"), "succeeded")


if __name__ == "__main__":
    main()
