#!/usr/bin/env python3
"""`cgq pause JOB [--now]` and `cgq resume JOB` (docs/architecture.md,
"Pause and resume"), with real trials that checkpoint every epoch:

- a pause: every running trial stops at its next checkpoint and waits as
  paused, nothing new starts; the coordinator killed with -9 and restarted:
  still paused; a resume: every trial finishes, each paused one resumed at a
  step at or after the one it paused at (CGQ_RESUME_STEP), with no failure,
  no retry and no retry used;
- hostile requests: unknown job, pause twice, resume of a job not paused,
  pause --now of a trial with no checkpoint yet (restarts from zero, and
  says so), a cancel of a paused job (its paused trials become cancelled),
  a pause of a job that has ended.
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, CgqTestCase, endpoint_port, main  # noqa: E402

CLIENTS = os.path.join(REPO, "clients", "python")

TRIAL = r'''
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import cgq

epochs, sleep_s, first_sleep = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
attempt = int(os.environ["CGQ_ATTEMPT"])
trial = os.environ["CGQ_TRIAL_ID"]
ck = cgq.checkpoint_dir()
start = cgq.resume_step()
state = None
sp = os.path.join(ck, "state.json")
if os.path.exists(sp):
    with open(sp) as f:
        state = json.load(f)
with open(os.path.join(os.environ["CGQ_SPEC_DIR"], "runs-%s.jsonl" % trial), "a") as f:
    f.write(json.dumps({"attempt": attempt, "resume": os.environ.get("CGQ_RESUME_STEP"),
                        "state": state}) + "\n")
first = (start or 0) + 1
if first == 1:
    time.sleep(first_sleep)
for epoch in range(first, epochs + 1):
    time.sleep(sleep_s)
    cgq.report(epoch=epoch, loss=1.0 / epoch, attempt=attempt)
    with open(sp, "w") as f:
        json.dump({"epoch": epoch}, f)
    cgq.checkpoint(epoch=epoch)
cgq.result(loss=1.0 / epochs, first=first, attempt=attempt)
'''

SPEC = '''name: pause-itest
space:
  x: {grid: [1, 2, 3, 4]}
search: {algorithm: grid}
objective: {metric: loss, mode: min}
trial:
  command: python3 {spec_dir}/pause_trial.py %(clients)s %(epochs)d %(sleep)s %(first)s
  resources: {cpu: 1}
  timeout: 2m
checkpoint: {store: '{spec_dir}/store'}
'''


class PauseTest(CgqTestCase):
    def setup_job(self, c, epochs=8, sleep="0.4", first="0"):
        c.write_file("pause_trial.py", TRIAL)
        return c.submit(c.write_file("pause.yaml", SPEC % dict(
            clients=CLIENTS, epochs=epochs, sleep=sleep, first=first)))

    def states(self, c, j):
        return {t: h.get("state") for t, h in c.trials(j).items()}

    def runs(self, c, t):
        path = os.path.join(c.specdir, "runs-%s.jsonl" % t)
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]

    def restart_coordinator(self, c):
        c.coordinator.kill9()
        c.start_coordinator(extra=("--durable-after", "200ms",
                                   "--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
                                   "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))

    def test_pause_survives_kill9_and_resumes_from_checkpoints(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        c.start_worker("w1", cpus=2)
        j = self.setup_job(c)
        running = c.wait_value(
            lambda: sorted(t for t, h in c.trials(j).items()
                           if h.get("state") == "running" and h.get("checkpoint")
                           and json.loads(h["checkpoint"])["step"]["epoch"] >= 2),
            lambda ts: len(ts) == 2, 60, "two trials running past their second checkpoint")

        r = c.cgq("pause", j)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("stop at their next checkpoint", r.stdout)
        self.assertEqual(c.job(j).get("pause"), "checkpoint")

        states = c.wait_value(lambda: self.states(c, j),
                              lambda s: sorted(t for t, v in s.items() if v == "paused") == running,
                              30, "both running trials paused at a checkpoint")
        self.assertEqual(sorted(t for t, v in states.items() if v == "pending"),
                         sorted(set(states) - set(running)), states)
        pause_step = {}
        for t in running:
            h = c.trial(j, t)
            ck = json.loads(h["checkpoint"])
            pause_step[t] = ck["step"]["epoch"]
            self.assertIn("paused at checkpoint ckpt-1-%d" % ck["n"], h.get("paused", ""), h)
            self.assertEqual(h.get("attempt"), "1", h)
        # The paused trials' tasks end on the worker; nothing new starts.
        c.wait_for(lambda: c.redis.hgetall("cgq:node:w1").get("running") == "0", 20,
                   "the worker to run nothing")
        time.sleep(2)
        self.assertEqual(self.states(c, j), states, "nothing moved while paused")
        self.assertEqual(c.job(j).get("paused"), "2", c.job(j))

        # Hostile: pause twice, unknown jobs, resume of a job that is not.
        r = c.cgq("pause", j)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("already paused", r.stdout)
        for verb in ("pause", "resume"):
            r = c.cgq(verb, 999)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("no job 999", r.stderr)

        # A power cut: still paused after a restart, still nothing starts.
        self.restart_coordinator(c)
        time.sleep(3)
        self.assertEqual(self.states(c, j), states, "still paused after a kill -9")
        self.assertEqual(c.job(j).get("pause"), "checkpoint")
        self.assertEqual(c.redis.hgetall("cgq:node:w1").get("running"), "0")
        r = c.cgq("status", j)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("paused", r.stdout)

        r = c.cgq("resume", j)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2 paused trial(s) queued again", r.stdout)
        r = c.cgq("resume", j)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("not paused", r.stderr)

        job = c.wait_job(j, 120)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "4", job)
        self.assertEqual(job.get("failed"), "0", job)
        self.assertNotIn("pause", job)
        types = [e["type"] for e in c.events(j)]
        self.assertIn("job.paused", types)
        self.assertIn("job.resumed", types)
        self.assertEqual(types.count("trial.paused"), 2, types)
        for bad in ("trial.retry", "trial.failed", "trial.lost"):
            self.assertNotIn(bad, types)
        for t in running:
            runs = self.runs(c, t)
            self.assertEqual(len(runs), 2, runs)
            self.assertIsNone(runs[0]["resume"])
            self.assertIsNotNone(runs[1]["resume"], runs)
            self.assertGreaterEqual(int(runs[1]["resume"]), pause_step[t], runs)
            self.assertEqual(runs[1]["state"]["epoch"], int(runs[1]["resume"]), runs)
            h = c.trial(j, t)
            self.assertEqual(h.get("attempt"), "2", h)
            self.assertEqual(h.get("stage_base"), "1", "the paused attempt uses no retry: %s" % h)
            self.assertNotIn("paused", h)
            m = json.loads(h["metrics"])
            self.assertEqual(m["first"], int(runs[1]["resume"]) + 1, m)
            # The learning curve continues: no epoch before the resume step twice.
            epochs = [json.loads(e["r"])["epoch"]
                      for e in c.redis.xrange("cgq:job:{%d}:reports:%s" % (j, t))]
            self.assertEqual(epochs[-1], 8, epochs)
            self.assertEqual(sorted(set(epochs)), list(range(1, 9)), epochs)
        for t in set(states) - set(running):
            self.assertEqual(len(self.runs(c, t)), 1)

    def test_pause_now_without_checkpoint_then_cancel(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        c.start_worker("w1", cpus=2)
        # Each trial sleeps 30 s before its first epoch: no checkpoint yet.
        j = self.setup_job(c, first="30")
        c.wait_value(lambda: self.states(c, j),
                     lambda s: list(s.values()).count("running") == 2, 30, "two trials running")
        r = c.cgq("pause", j, "--now")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2 running trial(s) stopped now", r.stdout)
        states = c.wait_value(lambda: self.states(c, j),
                              lambda s: list(s.values()).count("paused") == 2, 20,
                              "both running trials paused at once")
        for t, v in states.items():
            if v == "paused":
                self.assertIn("no checkpoint", c.trial(j, t).get("paused", ""))
        c.wait_for(lambda: c.redis.hgetall("cgq:node:w1").get("running") == "0", 20,
                   "the worker to run nothing")
        with open(c.coordinator.err_path) as f:
            self.assertIn("restarts it from zero", f.read())
        self.assertEqual(c.job(j).get("pause"), "now")

        # The Python client's Job.pause/resume, over the same control socket
        # (run by the Python that has its packages: redis, zmq, protobuf).
        py = "/usr/bin/python3"
        script = ("import sys; sys.path.insert(0, %r); import cgq\n"
                  "with cgq.Client(redis=%r, coordinator=%r) as cl:\n"
                  "    print(cl.job(%d).pause())\n"
                  "    try:\n"
                  "        cgq.Job(cl, 999).resume()\n"
                  "    except cgq.NotFound as e:\n"
                  "        print('NotFound:', e)\n" % (CLIENTS, c.redis_url, c.control_ep, j))
        r = subprocess.run([py, "-c", script], capture_output=True, text=True, timeout=60)
        if "needs redis for Python" in r.stderr or "No module named" in r.stderr:
            print("skipping the Python client part: %s" % r.stderr.strip()[-200:])
        else:
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("already paused --now", r.stdout)
            self.assertIn("NotFound: no job 999", r.stdout)

        r = c.cgq("cancel", j)
        self.assertEqual(r.returncode, 0, r.stderr)
        job = c.wait_job(j, 30)
        self.assertEqual(job.get("state"), "cancelled", job)
        self.assertEqual(job.get("cancelled"), "4", job)
        self.assertEqual(job.get("paused"), "0", job)
        self.assertEqual(set(self.states(c, j).values()), {"cancelled"})
        for verb in ("pause", "resume"):
            r = c.cgq(verb, j)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn("already cancelled", r.stderr)


if __name__ == "__main__":
    main()
