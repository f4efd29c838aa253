#!/usr/bin/env python3
"""Orphans of a killed worker's trial. The trial forks a child that calls
setsid() and forks the grandchild, then exits (a double fork: the grandchild
is in a session of its own and nobody's child in the trial); the grandchild
writes its pid to a file and sleeps. The worker is killed with SIGKILL:
within 5 s the grandchild is gone (the worker's reaper killed it). A worker
started again with the same --workdir and id runs the trial's next attempt
and the job finishes.

Once with --confine cgroup (skipped, saying why, when not root or where
cgroup v2 is not usable) and once with --confine pgroup. Exit 77 when a case
was skipped and none failed."""

import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, SPEED, pid_alive, tail  # noqa: E402

SCRIPT = r'''
import json, os, sys, time
attempt = int(os.environ["CGQ_ATTEMPT"])
if attempt == 1:
    pidfile = os.path.join(os.environ["CGQ_SPEC_DIR"], "grandchild.pid")
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() == 0:
            with open(pidfile + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pidfile + ".tmp", pidfile)
            time.sleep(600)
        os._exit(0)
    os.waitpid(child, 0)
    time.sleep(600)
os.write(3, (json.dumps({"score": attempt}) + "\n").encode())
'''

SPEC = '''name: orphans-itest
space:
  x: 1
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/orphan.py
  resources: {cpu: 1}
  timeout: 2m
  retries: 0
'''

LOG_LINE = {
    "cgroup": r"trials confined in cgroup v2 at (\S+) ",
    "pgroup": r"trials confined by session and process group",
}


class BothConfinements:
    """Runs self.run_case(mode) once per confinement mode: cgroup (as root
    only; skipped, saying so, elsewhere) and pgroup."""

    def test_cgroup(self):
        if os.geteuid() != 0:
            reason = "skipped: --confine cgroup is tested as root only (euid %d)" % os.geteuid()
            print(reason, file=sys.stderr)
            self.skipTest(reason)
        self.run_case("cgroup")

    def test_pgroup(self):
        self.run_case("pgroup")


class OrphansTest(BothConfinements, CgqTestCase):
    def start_worker(self, mode):
        """Starts worker w1 with --confine mode; skips the test when the worker
        says cgroup v2 is not usable here. Returns it once it is alive."""
        c = self.cluster
        w = c.start_worker("w1", cpus=1, extra=("--confine", mode), wait=False)

        def up():
            if not w.alive():
                return "exited"
            return c.redis.hgetall("cgq:node:w1").get("state") == "alive"
        deadline = 20
        state = None
        t_end = time.monotonic() + deadline * SPEED
        while time.monotonic() < t_end:
            state = up()
            if state:
                break
            time.sleep(0.05)
        if state == "exited":
            err = tail(w.err_path)
            m = re.search(r"--confine cgroup: cgroup v2 is not usable here: [^\n]*", err)
            if mode == "cgroup" and m and w.popen.returncode == 1:
                w.expect_exit = None
                reason = "skipped: " + m.group(0)
                print(reason, file=sys.stderr)
                self.skipTest(reason)
            self.fail("worker --confine %s exited with %s:\n%s" % (mode, w.popen.returncode, err))
        if state is not True:
            self.fail("worker w1 not alive within %ss" % deadline)
        return w

    def run_case(self, mode):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        w = self.start_worker(mode)
        m = re.search(LOG_LINE[mode], tail(w.err_path))
        self.assertIsNotNone(m, "the worker logs how trials are confined (%s):\n%s" % (
            mode, tail(w.err_path)))
        cgroup_dir = m.group(1) if mode == "cgroup" else None
        if cgroup_dir:
            self.assertTrue(os.path.isdir(cgroup_dir), cgroup_dir)

        c.write_file("orphan.py", SCRIPT)
        j = c.submit(c.write_file("orphans.yaml", SPEC))
        pidfile = os.path.join(c.specdir, "grandchild.pid")
        c.wait_for(lambda: os.path.exists(pidfile), 30, "the grandchild to write its pid")
        with open(pidfile) as f:
            gc = int(f.read())
        self.assertTrue(pid_alive(gc), "the grandchild %d runs" % gc)
        os.unlink(pidfile)

        w.kill9()
        try:
            c.wait_for(lambda: not pid_alive(gc), 5,
                       "grandchild %d of the killed worker to be gone" % gc)
        finally:
            if pid_alive(gc):
                os.kill(gc, 9)
        if cgroup_dir:
            c.wait_for(lambda: not os.path.exists(cgroup_dir), 5,
                       "the killed worker's cgroup %s to be removed" % cgroup_dir)

        # The same id and workdir again: the trial runs again and ends.
        self.start_worker(mode)
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "1", job)
        t = c.trial(j, 0)
        self.assertEqual(t.get("state"), "succeeded", t)
        self.assertEqual(t.get("node"), "w1", t)
        self.assertGreaterEqual(int(t.get("attempt", "0")), 2, t)
        self.assertFalse(os.path.exists(pidfile), "attempt 1 ran again")


def main():
    """Exit 1 on a failure, else 77 (ctest's skip) when a case was skipped,
    so that a host without cgroup v2 does not pass for one that checked it."""
    prog = unittest.main(verbosity=2, exit=False)
    r = prog.result
    if not r.wasSuccessful():
        sys.exit(1)
    sys.exit(77 if r.skipped else 0)


if __name__ == "__main__":
    main()
