#!/usr/bin/env python3
"""A worker cut off from the coordinator past the heartbeat timeout whose
own attempts finish during the cut, healed before their re-runs finish, in
network namespaces this test creates (root only; exit 77 with the reason
elsewhere). test_netcut.py has the other order (the re-runs finish first and
the late results are ignored).

The test process moves itself into namespace A: Redis, the coordinator and
worker w1 live there; worker w2 lives in namespace B, joined by a veth pair
that drops every packet during the cut (a partition, not a refusal). Each
trial sleeps 5 s. w2 runs 2 trials; the cut declares it dead after 1 s
(heartbeat 200 ms x 5) and its 2 trials go back to the queue with attempt 2,
to start on w1 when w1's own trials end. w2's attempts end during the cut;
the link heals before the re-runs end. As docs/operations.md says (first
outcome wins), w2's late results are recorded (trial.late_result) and the
re-runs stopped: every trial ends exactly once in the records, the events and
the leaderboard; nothing is counted twice."""

import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402
from harness import CgqTestCase, Netns, Proc, binary, main, read_text, tail  # noqa: E402

N = 4
SLEEP_S = 5.0
NET = Netns("cgqw")
SKIP = None
NS_A = None


class WorkerPartitionTest(CgqTestCase):
    def setUp(self):
        if SKIP:
            raise unittest.SkipTest(SKIP)
        super().setUp()

    def test_cut_off_worker_finishes_first(self):
        c = self.cluster
        ns_b = NET.add("b%d" % len(NET.names))
        addr_a, addr_b, link = NET.link(NS_A, ns_b)
        c.start_redis()
        port = harness.free_port()
        argv = [binary("cgq-coordinator"), "--redis", c.redis_url, "--bind",
                "tcp://0.0.0.0:%d" % port, "--control", "tcp://127.0.0.1:0", "--heartbeat",
                "200ms", "--insecure"]
        coord = Proc("coordinator", argv, c.logdir, capture_stdout=True)
        c.procs.append(coord)
        c.coordinator = coord
        line = coord.wait_first_line(30)
        m = harness.READY_RE.match(line or "")
        self.assertTrue(m, "ready line %r:\n%s" % (line, tail(coord.err_path)))
        c.control_ep = m.group(2)
        c.nodes_ep = "tcp://127.0.0.1:%d" % port
        c.start_worker("w1", cpus=2)
        wd = os.path.join(c.tmp, "w2")
        w2 = Proc("worker-w2", ["ip", "netns", "exec", ns_b, binary("cgq-worker"),
                                "--coordinator", "tcp://%s:%d" % (addr_a, port), "--id", "w2",
                                "--cpus", "2", "--gpus", "none", "--workdir", wd,
                                "--kill-grace", "1s"], c.logdir)
        c.procs.append(w2)
        c.workers["w2"] = w2
        c.wait_for(lambda: c.redis.hgetall("cgq:node:w2").get("state") == "alive", 20,
                   "w2 (namespace B) to join")
        j = c.submit(c.write_counted_job("worker-cut", N, SLEEP_S))

        def on(node):
            return sorted(t for t, h in c.trials(j).items()
                          if h.get("node") == node and h.get("state") == "running")
        c.wait_value(lambda: (len(on("w1")), len(on("w2"))), lambda v: v == (2, 2), 30,
                     "2 trials on each worker")
        cut_off = on("w2")
        NET.cut(link)
        try:
            c.wait_for(lambda: c.redis.hgetall("cgq:node:w2").get("state") == "dead", 20,
                       "w2 to be declared dead behind the cut")
            # w2's attempts end behind the cut; their re-runs start on w1.
            c.wait_for(lambda: read_text(w2.err_path).count("TASK_SUCCEEDED") == 2, 20,
                       "w2's own attempts to end during the cut")
            c.wait_for(lambda: all(c.trial(j, t).get("attempt") == "2" and
                                   c.trial(j, t).get("node") == "w1" and
                                   c.trial(j, t).get("state") == "running" for t in cut_off),
                       20, "the re-runs (attempt 2) to run on w1")
        finally:
            NET.heal(link)
        t_heal = time.monotonic()
        job = c.wait_job(j, 60)
        took = time.monotonic() - t_heal
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), str(N), job)
        self.assertEqual(sum(int(job.get(k, "0")) for k in (
            "succeeded", "failed", "cancelled", "pending", "running", "stale")), N, job)
        self.assertLess(took, SLEEP_S - 1.0,
                        "the job ended before the re-runs could have: they were stopped")
        trials = c.trials(j)
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
        for t in cut_off:
            self.assertEqual((trials[t].get("node"), trials[t].get("attempt")), ("w2", "1"),
                             "the record names the attempt kept and the node it ran on: %s"
                             % trials[t])
        ev = c.events(j)
        ok = [int(e["trial"]) for e in ev if e.get("type") == "trial.succeeded"]
        self.assertEqual(sorted(ok), list(range(N)), "each trial recorded once: %r" % ev)
        late = sorted(int(e["trial"]) for e in ev if e.get("type") == "trial.late_result")
        self.assertEqual(late, cut_off, "w2's late results were recorded: %r" % ev)
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), N)
        runs = c.counted_runs()
        self.assertEqual(runs, sorted([(t, 1) for t in range(N)] + [(t, 2) for t in cut_off]),
                         "each cut-off trial was re-run once, the others ran once")
        log = read_text(c.workers["w1"].err_path)
        for t in cut_off:
            self.assertTrue(re.search(r"job=%d trial=%d attempt=2: .*(stop|kill|TASK_STOPPED)"
                                      % (j, t), log, re.I),
                            "w1 was told to stop the re-run of trial %d:\n%s" % (t, log[-3000:]))
        print("cut w2 off: its 2 attempts ended behind the cut and were recorded %s; the "
              "re-runs on w1 stopped; job done %.1f s after the heal" % (late, took))


if __name__ == "__main__":
    NS_A, SKIP = NET.enter_home()
    try:
        main()
    finally:
        NET.close()
