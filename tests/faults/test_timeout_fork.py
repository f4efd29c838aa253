#!/usr/bin/env python3
"""A trial that forks children which ignore SIGTERM, then hits its timeout.

Each attempt's main process ignores SIGTERM, starts a child that ignores it
too (in its session), and a grandchild that leaves the session (setsid and
a double fork) and ignores it as well; all of them sleep far past the 1 s
timeout. The worker's SIGTERM ends none of them; SIGKILL after the 1 s
grace must end every one, in cgroup mode (a leaf per trial, when root and
cgroup v2 is usable) and in pgroup mode (session, descendants and the
adopted orphans with the trial's CGQ_TRIAL_DIR).

With retries: 1 the trial times out twice and fails: each attempt is
recorded as timed out exactly once (one trial.retry, then one
trial.failed), the second attempt starts only after every process of the
first is gone, and when the job ends no process of either attempt is left.
Exit 77 when the cgroup case was skipped and none failed."""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import test_orphans  # noqa: E402
from harness import CgqTestCase, pid_alive  # noqa: E402

SCRIPT = r'''
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
d = os.environ["CGQ_SPEC_DIR"]
a = os.environ["CGQ_ATTEMPT"]
# What of the previous attempt still runs as this one starts.
if a != "1":
    prev = [int(x) for x in open(os.path.join(d, "pids-1.txt")).read().split()]
    alive = []
    for p in prev:
        try:
            with open("/proc/%d/stat" % p) as f:
                st = f.read()
        except OSError:
            continue
        if st[st.rfind(")") + 2:].split()[0] != "Z":  # a zombie has ended
            alive.append(p)
    with open(os.path.join(d, "leftovers-%s.txt" % a), "w") as f:
        f.write(json.dumps(alive))
r, w = os.pipe()
if os.fork() == 0:  # a child in the trial's session, deaf to SIGTERM
    os.close(r)
    os.write(w, b"%d\n" % os.getpid())
    if os.fork() == 0:  # leaves the session: a grandchild nobody's child in the trial
        os.setsid()
        if os.fork() == 0:
            os.write(w, b"%d\n" % os.getpid())
            os.close(w)
            while True:
                time.sleep(600)
        os._exit(0)
    os.close(w)
    while True:
        time.sleep(600)
os.close(w)
pids = [os.getpid()]
with os.fdopen(r) as f:
    pids += [int(x) for x in f.read().split()]
with open(os.path.join(d, "pids-%s.txt.tmp" % a), "w") as f:
    f.write(" ".join(map(str, pids)))
os.rename(os.path.join(d, "pids-%s.txt.tmp" % a), os.path.join(d, "pids-%s.txt" % a))
os.write(3, b'{"score": 1}\n')
while True:
    time.sleep(600)
'''

SPEC = '''name: timeout-fork-fault
space:
  x: 1
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/deaf.py
  resources: {cpu: 1}
  timeout: 1s
  retries: 1
'''


class TimeoutForkTest(test_orphans.BothConfinements, CgqTestCase):
    start_worker = test_orphans.OrphansTest.start_worker

    def run_case(self, mode):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        self.start_worker(mode)
        c.write_file("deaf.py", SCRIPT)
        j = c.submit(c.write_file("deaf.yaml", SPEC))
        pids = {}
        for a in ("1", "2"):
            path = os.path.join(c.specdir, "pids-%s.txt" % a)
            c.wait_for(lambda: os.path.exists(path), 30, "attempt %s to write its pids" % a)
            with open(path) as f:
                pids[a] = [int(x) for x in f.read().split()]
            self.assertEqual(len(pids[a]), 3, "main, child, grandchild: %s" % pids[a])
        job = c.wait_job(j, 30)
        try:
            self.assertEqual(job.get("state"), "finished", job)
            self.assertEqual(job.get("failed"), "1", job)
            t = c.trial(j, 0)
            self.assertEqual(t.get("state"), "failed", t)
            self.assertEqual(t.get("attempt"), "2", t)
            self.assertRegex(t.get("error", ""), r"^timed out after 1(\.0+)?s", t)
            ev = [e for e in c.events(j) if e.get("trial") == "0"]
            retries = [e for e in ev if e["type"] == "trial.retry"]
            self.assertEqual(len(retries), 1, "one retry: %s" % ev)
            self.assertEqual(retries[0].get("attempt"), "1", retries)
            self.assertRegex(retries[0].get("detail", ""), r"timed out", retries)
            ends = [e for e in ev if e["type"] in ("trial.failed", "trial.succeeded",
                                                    "trial.cancelled")]
            self.assertEqual(len(ends), 1, "the trial ends once: %s" % ev)
            self.assertEqual(ends[0].get("attempt"), "2", ends)
            with open(os.path.join(c.specdir, "leftovers-2.txt")) as f:
                self.assertEqual(f.read(), "[]", "attempt 1's processes were gone when 2 began")
            every = pids["1"] + pids["2"]
            c.wait_for(lambda: not any(pid_alive(p) for p in every), 5,
                       "every process of both attempts (%s) to be gone" % every)
            runs = c.cgq("results", j, "--format", "json")
            self.assertEqual(runs.returncode, 0, runs.stderr)
            self.assertIn("timed out", runs.stdout)
        finally:
            for p in pids.get("1", []) + pids.get("2", []):
                if pid_alive(p):
                    os.kill(p, 9)


if __name__ == "__main__":
    test_orphans.main()
