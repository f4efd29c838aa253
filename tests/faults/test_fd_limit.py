#!/usr/bin/env python3
"""A worker at its open-file limit: starts fail with a reason that names the
limit, the worker stays up and keeps its fds, and once the limit is raised it
runs trials again.

The limit is lowered from outside (prlimit on the worker's pid) to the
worker's lowest free fd number, so no new fd can be had: not for a trial's log
files, its pipes (the three made ahead are already there), its cgroup leaf,
nor a spare directory. Each attempt that cannot start is reported lost by the
worker; with `retries: 0` the trial fails at once, its error saying why.

The coordinator: it lifts a low soft limit to the hard one at start, and at
its hard limit (where ZeroMQ can accept no node or CLI) it says so."""

import os
import resource
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import CgqTestCase, main, read_text  # noqa: E402

SPEC = '''name: {name}
space:
  x: {{grid: [{grid}]}}
objective: {{metric: score, mode: max}}
trial:
  command: [sh, "{{spec_dir}}/t.sh"]
  retries: 0
  timeout: 30s
'''


def fds(pid):
    d = "/proc/%d/fd" % pid
    out = {}
    for name in os.listdir(d):
        try:
            out[int(name)] = os.readlink(os.path.join(d, name))
        except OSError:
            pass  # closed meanwhile
    return out


class FdLimitTest(CgqTestCase):
    def _job(self, c, name, n):
        c.write_file("t.sh", 'echo \'{"score": 1}\' >&3\n')
        spec = c.write_file(name + ".yaml", SPEC.format(name=name, grid=", ".join(
            str(i) for i in range(n))))
        return c.wait_job(c.submit(spec), 60), c

    def _settled(self, c, pid):
        # After a job the worker makes its spares and pipes ahead again: the
        # fd table is read once two reads 0.3 s apart agree.
        def same():
            a = fds(pid)
            time.sleep(0.3)
            b = fds(pid)
            return b if a == b else None
        return c.wait_for(same, 20, "the worker's fd table to settle")

    def test_starts_fail_clearly_at_the_limit_and_resume_after(self):
        c = self.start_default(workers=(("w1", 2),))
        w = c.workers["w1"]
        job, _ = self._job(c, "before", 4)
        self.assertEqual(job.get("succeeded"), "4", job)
        before = self._settled(c, w.pid)

        soft, hard = resource.prlimit(w.pid, resource.RLIMIT_NOFILE)
        # New fds take the lowest free number, which must be under the
        # limit: a limit at the first free number leaves none to take.
        lowest_free = min(n for n in range(len(before) + 1) if n not in before)
        resource.prlimit(w.pid, resource.RLIMIT_NOFILE, (lowest_free, hard))
        try:
            job, _ = self._job(c, "at-limit", 3)
        finally:
            resource.prlimit(w.pid, resource.RLIMIT_NOFILE, (soft, hard))
        self.assertEqual(job.get("failed"), "3", job)
        for t in range(3):
            tr = c.trial(int(job["id"]), t)
            self.assertEqual(tr.get("state"), "failed", tr)
            err = tr.get("error", "")
            self.assertIn("open file limit", err, "the error names the limit: %r" % err)
        self.assertTrue(w.alive(), "the worker outlived its fd limit")
        self.assertEqual(c.redis.hgetall("cgq:node:w1").get("state"), "alive")

        # Nothing a failed start opened is left open: at most what it had
        # made ahead (spare directories with their open logs, the next
        # start's pipes) is used up.
        during = self._settled(c, w.pid)
        self.assertLessEqual(set(during), set(before),
                             "fds before %s, after the failed starts %s" % (before, during))

        job, _ = self._job(c, "after", 4)
        self.assertEqual(job.get("succeeded"), "4", job)
        # ... and the worker makes it all again: the same kinds of fds as
        # before the limit, as many of each.
        def kinds(t):
            out = {}
            for target in t.values():
                k = target.split(":")[0] if ":" in target and not target.startswith("/") \
                    else os.path.basename(target)
                out[k] = out.get(k, 0) + 1
            return out
        after = self._settled(c, w.pid)
        self.assertEqual(kinds(after), kinds(before),
                         "fds before %s, after %s" % (before, after))
        # The worker's log says what happened, without a flood.
        with open(w.err_path) as f:
            lines = [l for l in f if "open file" in l or "Too many open files" in l]
        self.assertGreater(len(lines), 0, "the worker logged the failed starts")
        self.assertLess(len(lines), 50, "one line per failed start, not a flood:\n%s"
                        % "".join(lines[:60]))


class CoordinatorFdLimitTest(CgqTestCase):
    def test_raises_its_soft_limit(self):
        """A coordinator started under a soft open-file limit below its hard
        one (a login shell's 1024) lifts it: each node holds a connection."""
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard <= 256:
            print("skipped: the hard open-file limit is %d" % hard)
            return
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))  # inherited by the cluster
        try:
            c = self.cluster
            c.start_redis()
            c.start_coordinator()
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        with open("/proc/%d/limits" % c.coordinator.pid) as f:
            line = [l for l in f if l.startswith("Max open files")][0].split()
        want = str(hard) if hard != resource.RLIM_INFINITY else str(1 << 20)
        self.assertEqual(line[3], want, line)
        with open(c.coordinator.err_path) as f:
            self.assertIn("open-file limit raised from 256 to %s" % want, f.read())

    def test_says_so_at_its_limit(self):
        """At its hard limit the coordinator cannot accept a connection, and
        a node or CLI that connects waits unanswered: it says so, naming the
        limit and how to raise it, keeps running, and accepts again once
        connections go."""
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        pid = c.coordinator.pid
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (64, 64))
        host, port = c.nodes_ep[len("tcp://"):].rsplit(":", 1)
        idle = []
        try:
            for _ in range(100):  # the kernel queues those it cannot accept
                idle.append(socket.create_connection((host, int(port)), timeout=5))
            c.wait_for(lambda: "open files are in use" in read_text(c.coordinator.err_path), 20,
                       "the coordinator to say it is at its limit")
            log = read_text(c.coordinator.err_path)
            self.assertRegex(log, r"\d+ of this coordinator's 64 open files are in use")
            self.assertIn("ulimit -n", log)
            self.assertTrue(c.coordinator.alive())
        finally:
            for s in idle:
                s.close()
        # Once those connections go, it accepts again: a CLI's submit works.
        j = c.submit(c.write_counted_job("after-the-limit", 1, 0.1))
        self.assertTrue(c.job(j), "the job was recorded")


if __name__ == "__main__":
    main()
