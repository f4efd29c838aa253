#!/usr/bin/env python3
"""Standby coordinators: one leads under a lease (cgq:leader), the other
waits. Workers and the CLI are given both endpoints.

  - kill -9 the leader mid-job: the standby takes the lease with a new epoch,
    adopts the running trials from the workers' Hellos, and finishes the job;
  - SIGSTOP the leader past its lease, then SIGCONT: the standby has taken
    over; the old leader notices before acting on anything, writes nothing
    (its batches are fenced by the lease) and stands by.

Either way every trial ends exactly once in the records, the counts, the
events and the leaderboard, and no trial's script ran twice."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import CgqTestCase, Proc, binary, free_port, main, tail  # noqa: E402


N = 16

LEASE = "1s"


class StandbyTest(CgqTestCase):
    def _pair(self):
        """A leader and a standby on fixed loopback ports; workers and the
        CLI get both endpoints."""
        c = self.cluster
        c.start_redis(appendonly=True)
        ports = [free_port() for _ in range(4)]
        eps = ["tcp://127.0.0.1:%d" % p for p in ports]
        lease = ("--lease", LEASE)
        leader = c.start_coordinator(extra=("--bind", eps[0], "--control", eps[1]) + lease)
        argv = [binary("cgq-coordinator"), "--redis", c.redis_url, "--bind", eps[2],
                "--control", eps[3], "--heartbeat", "200ms", "--lease", LEASE]
        standby = Proc("standby", argv, c.logdir, capture_stdout=True)
        c.procs.append(standby)
        line = standby.wait_first_line(30)
        self.assertTrue(line and line.startswith("cgq-coordinator standby leader=%d " % c.epoch),
                        "the second coordinator stands by: %r\n%s" % (line, tail(standby.err_path)))
        c.nodes_ep = "%s,%s" % (eps[0], eps[2])
        c.control_ep = "%s,%s" % (eps[1], eps[3])
        for w in ("w1", "w2"):
            c.start_worker(w, cpus=2)
        j = c.submit(c.write_counted_job("standby-fault", N, 0.8))
        c.wait_value(lambda: sum(1 for h in c.trials(j).values() if h.get("state") == "running"),
                     lambda n: n == 4, 30, "4 trials to run")
        return leader, standby, j

    def _took_over(self, standby, old_epoch):
        c = self.cluster
        c.wait_for(lambda: (c.redis.cmd("GET", "cgq:leader") or "").endswith(":%d" % standby.pid)
                   and int(c.redis.cmd("GET", "cgq:leader").split()[0]) > old_epoch,
                   20, "the standby to hold the lease")
        return int(c.redis.cmd("GET", "cgq:leader").split()[0])

    def _check_once(self, j):
        c = self.cluster
        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), str(N), job)
        trials = c.trials(j)
        self.assertEqual(sorted(trials), list(range(N)))
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
            self.assertEqual(h.get("attempt"), "1", "trial %d ran once: %s" % (t, h))
        ok = [int(e["trial"]) for e in c.events(j) if e.get("type") == "trial.succeeded"]
        self.assertEqual(sorted(ok), list(range(N)), "one trial.succeeded event per trial")
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), N)
        runs = c.counted_runs()
        self.assertEqual(runs, [(t, 1) for t in range(N)], "each trial's script ran once")
        r = c.cgq("results", j, "--format", "csv")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len([x for x in r.stdout.splitlines()[1:] if x.strip()]), N, r.stdout)

    def test_kill9_leader_standby_takes_over(self):
        c = self.cluster
        leader, standby, j = self._pair()
        old = c.epoch
        t0 = time.monotonic()
        leader.kill9()
        epoch = self._took_over(standby, old)
        took = time.monotonic() - t0
        self.assertEqual(epoch, old + 1)
        self._check_once(j)
        self.assertEqual(c.redis.hgetall("cgq:coordinator").get("pid"), str(standby.pid))
        print("standby took the lease %.2f s after the leader's kill -9 (lease %s)" % (took, LEASE))
        with open(standby.err_path) as f:
            self.assertIn("took over as leader", f.read())

    def test_paused_leader_is_fenced_and_stands_by(self):
        c = self.cluster
        leader, standby, j = self._pair()
        old = c.epoch
        os.kill(leader.pid, signal.SIGSTOP)
        try:
            epoch = self._took_over(standby, old)
            time.sleep(1.5)  # the standby dispatches and records meanwhile
        finally:
            os.kill(leader.pid, signal.SIGCONT)
        # The old leader finds the lease gone before it acts, and stands by
        # again as the same process (re-executed).
        c.wait_for(lambda: "lost the leader lease" in open(leader.err_path).read(), 20,
                   "the old leader to notice")
        c.wait_for(lambda: "cgq-coordinator standby leader=%d " % epoch in open(leader.out_path).read(),
                   20, "the old leader to stand by")
        self.assertTrue(leader.alive(), "it stands by; it does not exit")
        self._check_once(j)
        info = c.redis.hgetall("cgq:coordinator")
        self.assertEqual(info.get("epoch"), str(epoch), info)
        self.assertTrue(info.get("batch", "").startswith("%d:" % epoch),
                        "every batch since was the new leader's: %s" % info)
        with open(leader.err_path) as f:
            log = f.read()
        self.assertNotIn("ready: nodes", log.split("lost the leader lease", 1)[1],
                         "the old leader did not take the lease back")


if __name__ == "__main__":
    main()
