#!/usr/bin/env python3
"""A worker at its open-file limit: starts fail with a reason that names the
limit, the worker stays up and keeps its fds, and once the limit is raised it
runs trials again.

The limit is lowered from outside (prlimit on the worker's pid) to the
worker's lowest free fd number, so no new fd can be had: not for a trial's log
files, its pipes (the three made ahead are already there), its cgroup leaf,
nor a spare directory. Each attempt that cannot start is reported lost by the
worker; with `retries: 0` the trial fails at once, its error saying why."""

import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import CgqTestCase, main  # noqa: E402

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


if __name__ == "__main__":
    main()
