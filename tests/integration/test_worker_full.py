#!/usr/bin/env python3
"""A worker whose --workdir is (nearly) full takes no new task (cgq-worker
--min-free): before it, a full disk made every trial sent to that worker
fail or be lost at its start while the coordinator kept sending them.

Without root there is no small filesystem to fill, so the full worker is
one asked for more free space than any disk has (--min-free 10^18 bytes):
- alone, it gets no trial: none is started, failed or lost; the job is
  blocked with the reason (cgq status); its node hash says why (`full`),
  `cgq workers` and the Python client show it, the coordinator logs it once;
- a second worker with room then runs every trial, once; the full one none;
- the coordinator killed -9 while the job waits on the full worker, and
  started again: the worker's Hello says it is full, so no trial goes to it
  before its first heartbeat (it did before `Hello.full`).
A real disk filling and emptying under a running worker (the tmpfs) is in
test_diskfull.py (root only).
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, CgqTestCase, endpoint_port, main  # noqa: E402

HUGE = str(10 ** 18)


def _read(path):
    with open(path, errors="replace") as f:
        return f.read()


class WorkerFullTest(CgqTestCase):
    def test_full_worker_takes_no_task(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.start_worker("wfull", cpus=2, extra=["--min-free", HUGE])
        c.wait_for(lambda: "--min-free" in (c.redis.hgetall("cgq:node:wfull").get("full") or ""),
                   10, "the full worker's reason in cgq:node:wfull")
        reason = c.redis.hgetall("cgq:node:wfull")["full"]
        self.assertRegex(reason, r"^--workdir \S+ has [\d.]+ MiB free, under --min-free [\d.]+ MiB$")

        n = 6
        j = c.submit(c.write_counted_job("full", n, 0.1))
        time.sleep(3)  # three heartbeats and many scheduling turns
        job = c.job(j)
        # Nothing started, failed or lost: the trials wait (the coordinator
        # makes a trial only once a slot can take it, so none may exist yet).
        for k in ("running", "failed", "stale", "succeeded"):
            self.assertEqual(job.get(k, "0"), "0", job)
        self.assertFalse(os.path.exists(os.path.join(c.specdir, "runs.txt")),
                         "a trial started on the full worker")
        for t, h in c.trials(j).items():
            self.assertIn(h.get("attempt", "0"), ("0", ""), "trial %d was attempted: %s" % (t, h))

        # Blocked, with the reason, not silently waiting (cgq status, cgq run's line).
        self.assertEqual(job.get("blocked"),
                         "the one worker that fits takes no new task, its disk is full: wfull (%s): "
                         "free space there, or give the worker a smaller --min-free" % reason, job)
        self.assertIn("blocked", c.cgq("status").stdout)

        out = c.cgq("workers").stdout

        py = subprocess.run(
            ["/usr/bin/python3", "-c",  # the Python with python3-redis
             "import sys, cgq; w = {n['id']: n for n in cgq.Client(redis=sys.argv[1]).workers()}; "
             "print(w['wfull']['full'])", c.redis_url],
            env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "clients", "python")),
            capture_output=True, text=True, timeout=60)
        self.assertEqual(py.stdout.strip(), reason, py.stderr)
        self.assertRegex(out, r"wfull\s+alive \(disk full\)", out)
        self.assertIn("wfull takes no new task for now: " + reason, out)
        self.assertEqual(_read(c.coordinator.err_path).count("node wfull takes no new task for now"), 1,
                         "logged once, not at every heartbeat")

        c.start_worker("wok", cpus=2)
        self.assert_exactly_once(j, n, timeout=60)
        self.assertNotIn("blocked", c.job(j))
        for t, h in c.trials(j).items():
            self.assertEqual(h.get("node"), "wok", "trial %d: %s" % (t, h))
        self.assertIn("--min-free", c.redis.hgetall("cgq:node:wfull").get("full"))

    def test_full_worker_across_a_coordinator_kill(self):
        # A job waiting (blocked) on the full worker, the coordinator killed
        # -9 and started again: the worker comes back with a Hello, and the
        # new coordinator must not hand it the waiting trials before its
        # first heartbeat says it is full.
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.start_worker("wfull", cpus=2, extra=["--min-free", HUGE])
        c.wait_for(lambda: c.redis.hgetall("cgq:node:wfull").get("full"), 10, "full said")
        n = 4
        j = c.submit(c.write_counted_job("fullkill", n, 0.1))
        c.wait_for(lambda: c.job(j).get("blocked"), 10, "the job to be blocked")
        c.coordinator.kill9()
        c.procs.remove(c.coordinator)
        nodes_port = endpoint_port(c.nodes_ep)
        control_port = endpoint_port(c.control_ep)
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % nodes_port,
                                   "--control", "tcp://127.0.0.1:%d" % control_port))
        c.wait_for(lambda: c.redis.hgetall("cgq:node:wfull").get("state") == "alive", 20,
                   "the worker back with the new coordinator")
        time.sleep(2)
        self.assertFalse(os.path.exists(os.path.join(c.specdir, "runs.txt")),
                         "a trial started on the full worker after the coordinator restart")
        self.assertIn("its disk is full", c.job(j).get("blocked", ""), c.job(j))
        c.start_worker("wok", cpus=2)
        self.assert_exactly_once(j, n, timeout=60)

    def test_min_free_zero_never_full(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.start_worker("w0", cpus=1, extra=["--min-free", "0"])
        j = c.submit(c.write_counted_job("zero", 2, 0))
        self.assert_exactly_once(j, 2, timeout=60)
        self.assertEqual(c.redis.hgetall("cgq:node:w0").get("full"), "")

    def test_bad_min_free_refused(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        w = c.start_worker("wbad", extra=["--min-free", "lots"], wait=False)
        w.popen.wait(timeout=10)
        c.procs.remove(w)
        self.assertNotEqual(w.popen.returncode, 0)
        self.assertIn("min-free", _read(w.err_path) + _read(w.out_path))


if __name__ == "__main__":
    main()
