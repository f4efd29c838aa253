#!/usr/bin/env python3
"""Checkpoints in an HTTP(S) store, the transport's faults (docs/operations.md,
"Checkpoint stores"), a real server (tests/support/http_store.py):

- dropped connections: the worker tries again and the seal goes through;
- a store that takes the body and answers late: with --checkpoint-stall 1s
  the attempt fails with why in bounded time, its queued seals dropped;
- https with a fresh self-signed certificate: trusted with
  --checkpoint-ca-file, refused without it (the trial fails naming the
  certificate).
The resume paths are in test_checkpoint_http.py.
"""

import hashlib
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "support"))
from harness import main  # noqa: E402
from http_store import HttpStore  # noqa: E402
from test_checkpoint_http import TOKEN, CheckpointHttpBase  # noqa: E402


class CheckpointHttpFaultsTest(CheckpointHttpBase):
    def test_dropped_connections_are_retried(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        self.worker("w1")
        # The first two requests (the first file's PUT) get no answer: the
        # worker tries again, the seal and the job go through.
        self.store.drop = 2
        j = self.job(epochs=2, sleep="0.1")
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(c.trial(j, 0).get("attempt"), "1")
        first = self.store.requests[:3]
        self.assertEqual([(m, code) for m, _, code, _ in first],
                         [("PUT", 0), ("PUT", 0), ("PUT", 201)], first)
        self.assertEqual(first[0][1], first[2][1])
        with open(os.path.join(c.workers["w1"].err_path)) as f:
            self.assertIn("attempt 2 of 4", f.read())
        rec = self.record(j)
        with open(os.path.join(self.local(rec["path"]), "manifest"), "rb") as f:
            self.assertEqual(rec["sha256"], hashlib.sha256(f.read()).hexdigest())

    def test_stalled_store_fails_the_trial_in_bounded_time(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        # A store that takes 3 s to answer, a worker that gives up on a
        # request after 1 s without a byte: 4 tries (1 + 3 retries) and the
        # attempt fails with why, well before its timeout.
        self.worker("w1", ("--checkpoint-stall", "1s"))
        self.store.slow_s = 3.0
        t0 = time.monotonic()
        j = self.job(epochs=40, sleep="0.5")
        job = c.wait_job(j, 60)
        took = time.monotonic() - t0
        t = c.trial(j, 0)
        self.assertEqual(t.get("state"), "failed", t)
        err = t.get("error", "")
        self.assertIn("cannot seal checkpoint 1", err)
        self.assertIn("PUT %s/ck/job-%d/trial-0/ckpt-1-1/files/" % (self.store.url, j), err)
        self.assertIn("timed out", err.lower())
        self.assertIn("did not answer in time", err)
        self.assertLess(took, 30, "bounded: 4 tries of ~1 s and the pauses")
        self.assertEqual(job.get("failed"), "1", job)

    def https_store(self):
        """An https store with a fresh self-signed certificate for localhost."""
        c = self.cluster
        cert, key = os.path.join(c.tmp, "store.crt"), os.path.join(c.tmp, "store.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
        st = HttpStore(os.path.join(c.tmp, "https-store"), token=TOKEN, tls=(cert, key)).start()
        self.addCleanup(st.stop)
        return st, cert

    def test_https_store(self):
        c = self.cluster
        st, cert = self.https_store()
        c.start_redis()
        c.start_coordinator()
        self.worker("w1", ("--checkpoint-ca-file", cert))
        j = self.job(epochs=3, sleep="0.1", url=st.url + "/ck")
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        rec = self.record(j)
        self.assertTrue(rec["path"].startswith(st.url + "/ck/job-%d/trial-0/ckpt-1-" % j), rec)
        local = os.path.join(st.root, rec["path"][len(st.url) + 1:], "manifest")
        with open(local, "rb") as f:
            self.assertEqual(rec["sha256"], hashlib.sha256(f.read()).hexdigest())
        self.assertTrue(st.requests and all(r[3] for r in st.requests), st.requests)

    def test_https_store_not_trusted(self):
        c = self.cluster
        st, _ = self.https_store()
        c.start_redis()
        c.start_coordinator()
        self.worker("w1")  # no --checkpoint-ca-file: the self-signed certificate is refused
        j = self.job(epochs=20, sleep="0.2", url=st.url + "/ck")
        c.wait_job(j, 60)
        t = c.trial(j, 0)
        self.assertEqual(t.get("state"), "failed", t)
        self.assertIn("cannot seal checkpoint 1", t.get("error", ""))
        self.assertIn("certificate", t.get("error", "").lower())
        self.assertEqual([r for r in st.requests if r[2] == 201], [])


if __name__ == "__main__":
    main()
