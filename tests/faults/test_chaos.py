#!/usr/bin/env python3
"""The chaos suite's repeated faults, on a seeded random search whose trials
fork a background child:

  - kill -9 a worker three times (started again each time with the same id);
  - kill -9 the coordinator twice, each time restarted at once (nothing lost
    or re-run: the running trials are adopted);
  - random kills and pauses of workers and of the coordinator for a bounded
    time (the seed is printed; CGQ_CHAOS_SEED replays one).

Each asserts: every trial ends exactly once in the trial records, the
counts, the leaderboard, the events and `cgq results`; a trial's script ran
again only after a trial.lost of that trial; no process of a trial outlives
the job; and the searched points and their values equal a fault-free run's
with the same seed."""

import os
import random
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import CgqTestCase, endpoint_port, main  # noqa: E402

SCRIPT = r'''
import json, os, subprocess, sys, time
with open(sys.argv[1], "a") as f:
    f.write("%s %s\n" % (os.environ["CGQ_TRIAL_ID"], os.environ["CGQ_ATTEMPT"]))
# A background child (a data loader, a GPU holder) that would outlive the
# trial if nothing confined it; the token marks it for the test.
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", sys.argv[3]])
time.sleep(float(sys.argv[2]))
x = json.loads(os.environ["CGQ_PARAMS"])["x"]
os.write(3, (json.dumps({"score": round(-(x - 0.3) ** 2, 9)}) + "\n").encode())
'''

N = 30


def spec(sleep_s, token):
    return '''name: chaos
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, samples: %d, seed: 7}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/t.py {spec_dir}/runs.txt %s %s
  resources: {cpu: 1}
  retries: 3
''' % (N, sleep_s, token)


def token_pids(token):
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    if token.encode() in f.read():
                        pids.append(int(d))
            except OSError:
                pass
    return pids


class ChaosTest(CgqTestCase):
    def _setup(self):
        c = self.cluster
        c.start_redis(appendonly=True)
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % self.ports[0],
                                   "--control", "tcp://127.0.0.1:%d" % self.ports[1]))
        for w in ("w1", "w2"):
            c.start_worker(w, cpus=2)
        c.write_file("t.py", SCRIPT)
        self.token = "cgq-chaos-%d-%d" % (os.getpid(), random.getrandbits(32))
        # The fault-free run first: its points and values are the reference.
        ref = c.submit(c.write_file("ref.yaml", spec(0.05, self.token)))
        job = c.wait_job(ref, 60)
        self.assertEqual(job.get("succeeded"), str(N), job)
        self.reference = self._points(ref)
        os.unlink(os.path.join(c.specdir, "runs.txt"))
        return c.submit(c.write_file("chaos.yaml", spec(0.6, self.token)))

    def setUp(self):
        super().setUp()
        from harness import free_port
        self.ports = (free_port(), free_port())

    def _points(self, j):
        return sorted((h.get("params"), h.get("value")) for h in self.cluster.trials(j).values())

    def _restart_coordinator(self):
        c = self.cluster
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % self.ports[0],
                                   "--control", "tcp://127.0.0.1:%d" % self.ports[1]))

    def _check(self, j):
        c = self.cluster
        job = c.wait_job(j, 120)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), str(N), job)
        counts = sum(int(job.get(k, "0") or 0) for k in
                     ("pending", "running", "succeeded", "failed", "stopped", "cancelled",
                      "unschedulable", "stale"))
        self.assertEqual(counts, N, "counts add up to total: %s" % job)
        trials = c.trials(j)
        self.assertEqual(sorted(trials), list(range(N)))
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
        ev = c.events(j)
        ok = [int(e["trial"]) for e in ev if e.get("type") == "trial.succeeded"]
        self.assertEqual(sorted(ok), list(range(N)), "one trial.succeeded event per trial")
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), N)
        r = c.cgq("results", j, "--format", "csv")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len([x for x in r.stdout.splitlines()[1:] if x.strip()]), N, r.stdout)
        lost = {}
        for e in ev:
            if e.get("type") == "trial.lost":
                lost[int(e["trial"])] = lost.get(int(e["trial"]), 0) + 1
        runs = {}
        with open(os.path.join(c.specdir, "runs.txt")) as f:
            for line in f:
                if line.strip():
                    t = int(line.split()[0])
                    runs[t] = runs.get(t, 0) + 1
        for t in range(N):
            self.assertGreaterEqual(runs.get(t, 0), 1, "trial %d ran" % t)
            self.assertLessEqual(runs.get(t, 0), 1 + lost.get(t, 0),
                                 "trial %d ran again only after being lost (%s)" % (t, lost))
        self.assertEqual(self._points(j), self.reference,
                         "the seeded search's points and values equal a fault-free run's")
        c.wait_for(lambda: not token_pids(self.token), 15, "no trial process to outlive the job")
        return sum(lost.values())

    def test_worker_killed_three_times(self):
        c = self.cluster
        j = self._setup()
        for i in range(3):
            c.wait_value(lambda: sum(1 for h in c.trials(j).values() if h.get("state") == "running"
                                     and h.get("node") == "w1"),
                         lambda n: n >= 1, 60, "w1 to run a trial (kill %d)" % (i + 1))
            c.workers["w1"].kill9()
            c.start_worker("w1", cpus=2, wait=False)
            time.sleep(1.0)
        reruns = self._check(j)
        print("3 kill -9 of a worker: %d trial(s) re-run (each lost mid-run)" % reruns)

    def test_coordinator_killed_and_restarted(self):
        c = self.cluster
        j = self._setup()
        for i in range(2):
            want = (i + 1) * N // 3
            c.wait_value(lambda: int(c.job(j).get("succeeded", "0")), lambda n: n >= want, 60,
                         "%d trials to succeed (kill %d)" % (want, i + 1))
            c.coordinator.kill9()
            self._restart_coordinator()
        reruns = self._check(j)
        self.assertEqual(reruns, 0, "running trials are adopted, not lost, after a restart")
        adopted = [e for e in c.events(j) if e.get("type") == "trial.adopted"]
        self.assertTrue(adopted, "the running trials were adopted from the workers")

    def test_redis_paused_with_batches_in_flight(self):
        # The coordinator does not wait for EXEC (a batch is in flight while
        # it reads on): redis-server stopped three times mid-job, once with a
        # coordinator kill -9 while it is stopped. Nothing is lost or run
        # twice, and no trial is lost: the workers never saw Redis.
        c = self.cluster
        j = self._setup()
        pid = c.redis_proc.pid
        for i, pause in enumerate((0.5, 1.5, 1.0)):
            want = (i + 1) * N // 4
            c.wait_value(lambda: int(c.job(j).get("succeeded", "0")), lambda n: n >= want, 60,
                         "%d trials to succeed (pause %d)" % (want, i + 1))
            os.kill(pid, signal.SIGSTOP)
            try:
                time.sleep(pause)
                if i == 2:
                    c.coordinator.kill9()
            finally:
                os.kill(pid, signal.SIGCONT)
            if i == 2:
                self._restart_coordinator()
        reruns = self._check(j)
        self.assertEqual(reruns, 0, "a paused Redis loses no trial")

    def test_random_kills_and_pauses(self):
        c = self.cluster
        seed = int(os.environ.get("CGQ_CHAOS_SEED", random.randrange(1 << 30)))
        print("chaos seed %d (CGQ_CHAOS_SEED=%d replays it)" % (seed, seed))
        rnd = random.Random(seed)
        j = self._setup()
        deadline = time.monotonic() + 12
        done = []
        while time.monotonic() < deadline:
            if c.job(j).get("state") == "finished":
                break
            fault = rnd.choice(["kill-worker", "pause-worker", "pause-coordinator",
                                "kill-coordinator"])
            w = rnd.choice(["w1", "w2"])
            if fault == "kill-worker":
                c.workers[w].kill9()
                c.start_worker(w, cpus=2, wait=False)
            elif fault == "pause-worker":
                pid = c.workers[w].pid
                os.kill(pid, signal.SIGSTOP)
                time.sleep(rnd.uniform(0.3, 2.0))
                os.kill(pid, signal.SIGCONT)
            elif fault == "pause-coordinator":
                pid = c.coordinator.pid
                os.kill(pid, signal.SIGSTOP)
                time.sleep(rnd.uniform(0.3, 3.0))
                os.kill(pid, signal.SIGCONT)
            else:
                c.coordinator.kill9()
                self._restart_coordinator()
            done.append(fault)
            time.sleep(rnd.uniform(0.5, 1.5))
        reruns = self._check(j)
        print("faults: %s; %d trial(s) re-run" % (", ".join(done), reruns))


if __name__ == "__main__":
    main()
