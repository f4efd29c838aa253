#!/usr/bin/env python3
"""A silent node's tasks are `stale`, visibly, until the dead-after timeout.

A worker is stopped with SIGSTOP mid-job (its trials keep running: they are
processes of their own). After --stale-after heartbeats of silence its
trials show as `stale` in their records, in the job's counts (which still
add up to the total), in `cgq status` and in `cgq results`.

- Paused for less than the dead-after timeout, then continued: its trials
  are `running` again and nothing is run twice or lost.
- Paused for longer: its trials are requeued (trial.lost) and run again
  elsewhere; the worker's late results are recorded only where no other
  attempt finished first. Every trial ends exactly once either way."""

import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import CgqTestCase, main  # noqa: E402

STATES = ("pending", "running", "succeeded", "failed", "stopped", "cancelled", "unschedulable",
          "stale")
N = 4
# heartbeat 300 ms: stale after 2 (600 ms of silence), dead after 10 (3 s).
COORD = ["--stale-after", "2", "--dead-after", "10"]


class StaleTest(CgqTestCase):
    def start(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=COORD, heartbeat="300ms")
        c.start_worker("w1", cpus=2)
        j = c.submit(c.write_counted_job("stale-fault", N, 2.5))
        c.wait_value(lambda: sum(1 for h in c.trials(j).values()
                                 if h.get("state") == "running" and h.get("node") == "w1"),
                     lambda n: n == 2, 30, "2 trials to run on w1")
        # w2 joins after: the trials left go there, and so would a requeued one.
        c.start_worker("w2", cpus=2)
        c.wait_value(lambda: sum(1 for h in c.trials(j).values() if h.get("state") == "running"),
                     lambda n: n == N, 30, "all trials to run")
        on_w1 = sorted(t for t, h in c.trials(j).items() if h.get("node") == "w1")
        return c, j, on_w1

    def counts(self, c, j):
        job = c.job(j)
        counts = {k: int(job.get(k, "0")) for k in STATES}
        self.assertEqual(sum(counts.values()), int(job["total"]),
                         "counts by state add up to the total: %s" % job)
        return counts

    def see_stale(self, c, j, on_w1):
        def stale():
            tr = c.trials(j)
            return all(tr[t].get("state") == "stale" for t in on_w1)
        c.wait_for(stale, 10, "w1's trials to show as stale")
        counts = self.counts(c, j)
        self.assertEqual(counts["stale"], len(on_w1), counts)
        st = c.cgq("status", j)
        self.assertEqual(st.returncode, 0, st.stderr)
        self.assertIn("stale %d" % len(on_w1), st.stdout, "cgq status shows the stale count")
        res = c.cgq("results", j, "--format", "json")
        self.assertEqual(res.returncode, 0, res.stderr)
        rows = {t["id"]: t for t in json.loads(res.stdout)["trials"]}
        for t in on_w1:
            self.assertEqual(rows[t]["state"], "stale", "cgq results: %s" % rows[t])
        lst = c.cgq("status")
        self.assertIn("stale)", lst.stdout, "the job list shows stale trials")

    def check_once(self, c, j):
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        counts = self.counts(c, j)
        self.assertEqual(counts["succeeded"], N, job)
        ev = c.events(j)
        for t in range(N):
            ends = [e["type"] for e in ev if e.get("trial") == str(t) and e.get("type") in
                    ("trial.succeeded", "trial.failed", "trial.cancelled")]
            self.assertEqual(ends, ["trial.succeeded"], "trial %d ends exactly once" % t)
        return ev

    def test_short_pause_stale_then_running(self):
        c, j, on_w1 = self.start()
        pid = c.workers["w1"].pid
        os.kill(pid, signal.SIGSTOP)
        try:
            self.see_stale(c, j, on_w1)
        finally:
            os.kill(pid, signal.SIGCONT)
        # Heard from again well before 3 s of silence: running again.
        def running():
            tr = c.trials(j)
            return all(tr[t].get("state") in ("running", "succeeded") for t in on_w1)
        c.wait_for(running, 10, "w1's trials to be running again")
        self.counts(c, j)
        ev = self.check_once(c, j)
        types = [e["type"] for e in ev]
        self.assertNotIn("trial.lost", types, "nothing lost by a pause shorter than dead-after")
        self.assertNotIn("node.dead", [e["type"] for e in c.events()], "no node declared dead")
        for t in on_w1:
            mine = [e["type"] for e in ev if e.get("trial") == str(t)]
            self.assertIn("trial.stale", mine, "trial %d: %s" % (t, mine))
            self.assertIn("trial.resumed", mine, "trial %d: %s" % (t, mine))
            self.assertLess(mine.index("trial.stale"), mine.index("trial.resumed"), mine)
        self.assertEqual(c.counted_runs(), [(t, 1) for t in range(N)], "each trial ran once")
        for t, h in c.trials(j).items():
            self.assertEqual(h.get("attempt"), "1", "trial %d was not re-run: %s" % (t, h))

    def test_long_pause_stale_then_requeued(self):
        c, j, on_w1 = self.start()
        pid = c.workers["w1"].pid
        os.kill(pid, signal.SIGSTOP)
        try:
            self.see_stale(c, j, on_w1)
            # Past dead-after: requeued, and run again on w2.
            c.wait_for(lambda: all(c.trial(j, t).get("state") != "stale" for t in on_w1), 15,
                       "w1's stale trials to be requeued")
            self.counts(c, j)
            ev = c.events(j)
            for t in on_w1:
                mine = [e["type"] for e in ev if e.get("trial") == str(t)]
                self.assertIn("trial.lost", mine, "trial %d: %s" % (t, mine))
                self.assertLess(mine.index("trial.stale"), mine.index("trial.lost"), mine)
            c.wait_for(lambda: all(int(c.trial(j, t).get("attempt", "0")) >= 2 for t in on_w1),
                       20, "w1's trials to run again elsewhere")
        finally:
            os.kill(pid, signal.SIGCONT)
        # First outcome wins: w1's late results (its trials finished while it
        # was stopped) and the re-runs end each trial once between them.
        self.check_once(c, j)
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), N)
        runs = c.counted_runs()
        for t in range(N):
            n = sum(1 for r in runs if r[0] == t)
            # A re-run that the late result withdrew may not have started.
            if t in on_w1:
                self.assertIn(n, (1, 2), "trial %d runs: %s" % (t, runs))
            else:
                self.assertEqual(n, 1, "trial %d runs: %s" % (t, runs))


if __name__ == "__main__":
    main()
