#!/usr/bin/env python3
"""Device queues, end to end over real sockets: 2 runners x 2 devices take 40
measurements while a worker runs a command job beside them. Each device runs
one measurement at a time (asserted from the recorded start and end of every
measurement, and from the runners seeing no Assign for a busy device); device
trials go only to devices whose tags match, command trials only to the worker.
A runner that goes silent mid-measurement has its task re-run elsewhere after
the heartbeat timeout. The runners are tests/integration/fakerunner.py: they
test the coordinator's promise on its own (a real runner would also refuse a
second task, which could hide a coordinator bug). RealRunnerLossTest does the
runner loss with cgq-device-runner killed -9 (test_device_runner.py has the
real runner's 2 x 2 exclusive-use, quarantine and enable cases)."""

import json
import os
import random
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_device_runner as real  # noqa: E402
from fakerunner import TASK_SUCCEEDED, FakeRunner  # noqa: E402
from harness import CgqTestCase, main, metrics_of  # noqa: E402

DEVICE_SPEC = '''name: exclusive
space:
  x: {uniform: [0, 1]}
search: {samples: 40, seed: 3}
objective: {metric: p50, mode: min}
trial:
  on: {device: fake-board}
  benchmark: sleep
  repeats: 3
  warmup: 1
  timeout: 30s
'''

WORKER_SPEC = '''name: beside
space:
  x: {uniform: [0, 1]}
search: {samples: 30}
trial: {kind: noop, resources: {cpu: 1}}
'''


class DeviceExclusiveTest(CgqTestCase):
    def _runners(self, c, behaviour, more=None):
        devs = {"r1": {"d1": {"device": "fake-board"}, "d2": {"device": "fake-board", "os": "x"}},
                "r2": {"d3": {"device": "fake-board"}, "d4": {"device": "fake-board"}}}
        devs.update(more or {})
        runners = {}
        for rid, d in devs.items():
            r = FakeRunner(c.nodes_ep, rid, d, behaviour)
            self.addCleanup(r.stop)
            runners[rid] = r
        for rid, r in runners.items():
            c.wait_for(lambda: c.redis.hgetall("cgq:node:" + rid).get("state") == "alive", 20,
                       "runner %s alive" % rid)
        return runners

    def test_one_measurement_per_device(self):
        c = self.start_default(workers=(("w1", 2),))
        rng = random.Random(7)
        lock = threading.Lock()

        def behaviour(device, info):
            with lock:
                return TASK_SUCCEEDED, rng.uniform(0.02, 0.08), None

        runners = self._runners(c, behaviour, {"r3": {"d5": {"device": "other-board"}}})
        jd = c.submit(c.write_file("dev.yaml", DEVICE_SPEC))
        jw = c.submit(c.write_file("noop.yaml", WORKER_SPEC))
        # A second Assign for a busy device is never answered: stop waiting
        # as soon as one is seen.
        c.wait_for(lambda: any(x.overlaps for x in runners.values()) or
                   c.job(jd).get("state") == "finished", 90, "job %d to finish" % jd)
        overlaps = [o for x in runners.values() for o in x.overlaps]
        self.assertEqual(overlaps, [], "Assigns for a busy or unknown device")
        job = c.wait_job(jd, 1)
        c.wait_job(jw, 60)
        self.assertEqual(job.get("succeeded"), "40", job)
        runs = [r for x in runners.values() for r in x.runs]
        self.assertEqual(len(runs), 40, "every measurement ran once")
        self.assertEqual(runners["r3"].runs, [], "d5 (device=other-board) matches no trial")
        for r in runs:
            self.assertEqual(r["kind"], "benchmark", r)
            self.assertEqual(r["benchmark"], "sleep", r)
            self.assertEqual((r["repeats"], r["warmup"], r["timeout_ms"]), (3, 1, 30000), r)
            self.assertEqual(r["argv"], [], "a runner never gets a command")

        # From what the coordinator recorded: each trial's device and the
        # interval its measurement reported; no two intervals of one device overlap.
        trials = c.trials(jd)
        self.assertEqual(len(trials), 40)
        by_device = {}
        for t in trials.values():
            m = metrics_of(t)
            self.assertEqual(t.get("device"), m["device"], t)
            self.assertIn(t.get("node"), ("r1", "r2"), t)
            by_device.setdefault(m["device"], []).append((m["start"], m["end"]))
        self.assertEqual(sorted(by_device), ["d1", "d2", "d3", "d4"], "all four devices used")
        for dev, spans in by_device.items():
            spans.sort()
            for (s0, e0), (s1, e1) in zip(spans, spans[1:]):
                self.assertLessEqual(e0, s1, "device %s ran two measurements at once: "
                                     "[%f, %f] and [%f, %f]" % (dev, s0, e0, s1, e1))
        for t in c.trials(jw).values():
            self.assertEqual(t.get("node"), "w1", "command trials run on the worker only")

        out = c.cgq("devices", "--format", "json")
        self.assertEqual(out.returncode, 0, out.stderr)
        devs = {d["id"]: d for d in json.loads(out.stdout)}
        self.assertEqual(sorted(devs), ["d1", "d2", "d3", "d4", "d5"])
        self.assertEqual(devs["d2"]["tags"], {"device": "fake-board", "os": "x"})
        for d in devs.values():
            self.assertEqual((d["state"], d["failures"], d["task"]), ("idle", 0, None), d)
        self.assertEqual(c.redis.hgetall("cgq:node:r1").get("kind"), "device-runner")
        self.assertEqual(c.redis.hgetall("cgq:node:r1").get("devices"), "d1,d2")
        rows = {l.split()[0]: l.split() for l in c.cgq("workers").stdout.splitlines()[1:]}
        self.assertEqual((rows["r1"][-1], rows["w1"][-1]), ("device-runner", "worker"), rows)

    def test_no_matching_device_is_unschedulable(self):
        c = self.start_default(workers=(("w1", 2),))
        j = c.submit(c.write_file("dev.yaml", DEVICE_SPEC))
        c.wait_for(lambda: c.job(j).get("blocked"), 20, "the job to be blocked")
        self.assertEqual(c.job(j)["blocked"],
                         "needs device with device=fake-board; connected devices: none")
        out = c.cgq("status", j)
        self.assertIn("needs device with device=fake-board", out.stdout)
        # A runner with a matching device joins: the job runs there.
        r = FakeRunner(c.nodes_ep, "late", {"b": {"device": "fake-board"}},
                       lambda d, i: (TASK_SUCCEEDED, 0.005, None))
        self.addCleanup(r.stop)
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("succeeded"), "40", job)
        self.assertEqual(len(r.runs), 40)

    def test_runner_lost_midway(self):
        c = self.start_default(workers=())
        slow = FakeRunner(c.nodes_ep, "slow", {"s1": {"device": "fake-board"}},
                          lambda d, i: (TASK_SUCCEEDED, 60, None))
        self.addCleanup(slow.stop)
        c.wait_for(lambda: c.redis.hgetall("cgq:node:slow").get("state") == "alive", 20, "slow")
        spec = DEVICE_SPEC.replace("samples: 40", "samples: 1")
        j = c.submit(c.write_file("one.yaml", spec))
        c.wait_for(lambda: slow.busy, 20, "the measurement to start on s1")
        fast = FakeRunner(c.nodes_ep, "fast", {"f1": {"device": "fake-board"}},
                          lambda d, i: (TASK_SUCCEEDED, 0.01, None))
        self.addCleanup(fast.stop)
        slow.stop()  # silent from now on, mid-measurement
        job = c.wait_job(j, 30)
        self.assertEqual(job.get("succeeded"), "1", job)
        t = c.trial(j, 0)
        self.assertEqual((t.get("node"), t.get("device"), t.get("attempt")), ("fast", "f1", "2"))
        self.assertEqual(c.redis.hgetall("cgq:device:s1").get("state"), "offline")
        self.assertEqual(c.redis.hgetall("cgq:node:slow").get("state"), "dead")

    def test_restart_adopts_each_task_on_its_device(self):
        # The coordinator restarts while d2 measures; the runner comes back
        # declaring d1 too, listed first. Adopted from the runner's Hello, the
        # task keeps d2 (the trial hash says so) rather than the first idle
        # device, so the next trials go to d1 and nothing else to d2 while it
        # is still measuring.
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        first = []

        def behaviour(device, info):
            if not first:
                first.append(info["ref"])
                return TASK_SUCCEEDED, 5.0, None  # outlasts a restart under load
            return TASK_SUCCEEDED, 0.1, None

        r = FakeRunner(c.nodes_ep, "lab", {"d2": {"device": "fake-board"}}, behaviour)
        self.addCleanup(r.stop)
        j = c.submit(c.write_file("dev.yaml", DEVICE_SPEC.replace("samples: 40", "samples: 4")))
        c.wait_for(lambda: first, 20, "a measurement on d2")
        problem = c.coordinator.stop()
        self.assertFalse(problem, problem)
        c.procs.remove(c.coordinator)
        c.start_coordinator()
        r.devices = {"d1": {"device": "fake-board"}, "d2": {"device": "fake-board"}}
        r.reconnect(c.nodes_ep)
        c.wait_for(lambda: r.overlaps or c.job(j).get("state") == "finished", 60,
                   "job %d to finish" % j)
        self.assertEqual(r.overlaps, [], "an Assign for a device still measuring")
        job = c.wait_job(j, 1)
        self.assertEqual(job.get("succeeded"), "4", job)
        job_id, trial_id, attempt = first[0]
        t = c.trial(job_id, trial_id)
        self.assertEqual((t.get("device"), t.get("attempt")), ("d2", str(attempt)), t)
        self.assertEqual(len(r.runs), 4, "each trial measured once: adopted, not re-run")
        self.assertIn("d1", [x["device"] for x in r.runs])
        adopted = [e for e in c.events(j) if e.get("type") == "trial.adopted"]
        self.assertEqual(len(adopted), 1, c.events(j))

class RealRunnerLossTest(CgqTestCase):
    # The real runner's config and start-up helpers, shared with its own test.
    runner_yaml = real.DeviceRunnerTest.runner_yaml
    start_runner = real.DeviceRunnerTest.start_runner

    def test_runner_killed_mid_measurement(self):
        c = self.start_default(workers=())
        log = os.path.join(self.tmp, "runs-{device}.log")
        benches = ("  sleep:\n"
                   "    command: [FAKE, --ms, '{ms}', --jitter, '0', --log, '%s']\n"
                   "    timeout: 60s\n" % log)
        cfg = self.runner_yaml("a", [("a1", {"device": "fake-board"})], benches)
        victim = self.start_runner("a", cfg)
        spec = c.write_file("one.yaml", """name: one
space:
  ms: {grid: [4000]}
trial:
  on: {device: fake-board}
  benchmark: sleep
  repeats: 1
  warmup: 1
""")
        j = c.submit(spec)
        c.wait_for(lambda: c.trial(j, 0).get("state") == "running", 20, "the measurement")
        c.wait_for(lambda: c.redis.hgetall("cgq:device:a1").get("state") == "busy", 20, "a1 busy")
        victim.kill9()
        # A second runner with a matching device: after the heartbeat timeout
        # (5 x 200 ms) the task is re-run there as attempt 2.
        cfg = self.runner_yaml("b", [("b1", {"device": "fake-board"})],
                               benches.replace("'{ms}'", "'50'"))
        self.start_runner("b", cfg)
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("succeeded"), "1", job)
        t = c.trial(j, 0)
        self.assertEqual((t.get("node"), t.get("device"), t.get("attempt")), ("b", "b1", "2"), t)
        self.assertEqual(c.redis.hgetall("cgq:node:a").get("state"), "dead")
        self.assertEqual(c.redis.hgetall("cgq:device:a1").get("state"), "offline")
        lost = [e for e in c.events(j) if e.get("type") == "trial.lost"]
        self.assertEqual(len(lost), 1, c.events(j))
        # The killed runner's measuring process may outlive it (whether it
        # dies with the runner is the runner's promise, and its test's):
        # the teardown kills it by PID instead of failing this test, which
        # is about the coordinator's side.
        c.allow_orphans = True

if __name__ == "__main__":
    main()
