#!/usr/bin/env python3
"""Multi-stage trials end to end (trial.stages): a real Redis, coordinator,
worker and cgq-device-runner.

- Three stages: `train` (a command on the worker) reports acc; `measure` (a
  benchmark on a device runner: cgq-fake-device with no jitter, its own
  report parsed, so its latency is known exactly) reports time; `report` (a
  command on the worker) reads the earlier stages' metrics as {train.acc}
  and as CGQ_STAGE_<STAGE>_<METRIC>. The objective, an expression over
  metrics of two stages, is checked against values computed here.
- The coordinator killed with -9 while every trial waits between its stages
  (no device runner yet): restarted, it runs the waiting stage, never a
  finished one again (each stage's process ran once per trial), and the job
  completes.
- An assignment param's env template (OP_BACKEND_{item}={choice}) gives a
  command trial one variable per item, matching the id's digits.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, Proc, binary, endpoint_port, main, metrics_of  # noqa: E402

TRAIN = r'''
import json, os, sys
p = json.loads(os.environ["CGQ_PARAMS"])
with open(sys.argv[1], "a") as f:
    f.write("train %s %s %s\n" % (os.environ["CGQ_TRIAL_ID"], os.environ["CGQ_ATTEMPT"],
                                  os.environ.get("CGQ_STAGE", "?")))
acc = round(0.5 + p["x"] / 100.0, 4)
os.write(3, (json.dumps({"acc": acc, "epoch": 1}) + "\n").encode())
'''

REPORT = r'''
import json, os, sys
with open(sys.argv[1], "a") as f:
    f.write("report %s %s %s\n" % (os.environ["CGQ_TRIAL_ID"], os.environ["CGQ_ATTEMPT"],
                                   os.environ.get("CGQ_STAGE", "?")))
acc_arg, time_arg = float(sys.argv[2]), float(sys.argv[3])
acc_env = float(os.environ["CGQ_STAGE_TRAIN_ACC"])
time_env = float(os.environ["CGQ_STAGE_MEASURE_TIME"])
earlier = json.loads(os.environ["CGQ_STAGE_METRICS"])
os.write(3, (json.dumps({"seen_acc": acc_arg, "seen_time": time_arg,
                         "env_agrees": acc_env == acc_arg and time_env == time_arg,
                         "stages_seen": sorted(earlier),
                         "epoch": 7}) + "\n").encode())
'''

SPEC = '''name: stages-itest
space:
  x: {grid: [%s]}
  ms: {grid: [%s]}
search: {algorithm: grid}
objective: {expr: "acc * 100 / time", mode: max}
trial:
  retries: 1
  stages:
    - name: train
      command: python3 {spec_dir}/train.py {spec_dir}/runs.txt
      resources: {cpu: 1}
    - name: measure
      on: {device: fake-board}
      benchmark: lat
      repeats: 2
      warmup: 1
      timeout: 60s
    - name: report
      command: ["python3", "{spec_dir}/report.py", "{spec_dir}/runs.txt", "{train.acc}",
                "{measure.time}"]
      resources: {cpu: 1}
'''


class StagesTest(CgqTestCase):
    def runner_yaml(self, log):
        fake = binary("cgq-fake-device")
        path = os.path.join(self.tmp, "runner.yaml")
        with open(path, "w") as f:
            f.write("cache: {dir: %s, max_size: 16M}\n" % os.path.join(self.tmp, "cache"))
            f.write("devices:\n  - {id: b1, tags: {device: fake-board}}\n")
            f.write("benchmarks:\n  lat:\n")
            f.write("    command: [%s, --ms, '{ms}', --jitter, '0', --report, --log, '%s']\n"
                    % (fake, log))
            f.write("    timing: parse\n    parse: {time: 'latency: ([0-9.]+) ms'}\n")
            f.write("    timeout: 10s\n")
        return path

    def start_runner(self, config):
        c = self.cluster
        argv = [binary("cgq-device-runner"), "--config", config, "--coordinator", c.nodes_ep,
                "--id", "r1", "--workdir", os.path.join(self.tmp, "r1"), "--heartbeat", "200ms"]
        p = Proc("r1", argv, c.logdir)
        c.procs.append(p)
        c.wait_for(lambda: c.redis.hgetall("cgq:node:r1").get("state") == "alive", 30,
                   "runner r1 alive")
        return p

    def write_job(self, xs, mss):
        c = self.cluster
        c.write_file("train.py", TRAIN)
        c.write_file("report.py", REPORT)
        return c.write_file("stages.yaml", SPEC % (", ".join(map(str, xs)),
                                                   ", ".join(map(str, mss))))

    def runs(self):
        path = os.path.join(self.cluster.specdir, "runs.txt")
        with open(path) as f:
            return [line.split() for line in f if line.strip()]

    def check_results(self, j, xs, mss, log):
        c = self.cluster
        trials = c.trials(j)
        self.assertEqual(len(trials), len(xs) * len(mss))
        want_values = []
        for t, h in sorted(trials.items()):
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
            p = json.loads(h["params"])
            m = metrics_of(h)
            acc = round(0.5 + p["x"] / 100.0, 4)
            # Independently: acc from the formula, time = the fake device's
            # exact sleep (no jitter; its own report is what is parsed).
            want = acc * 100 / p["ms"]
            want_values.append(want)
            self.assertAlmostEqual(float(h["value"]), want, places=6, msg=h)
            # The merged result: every stage's metrics, a later stage's name wins.
            self.assertEqual(m["acc"], acc)
            self.assertEqual(m["time"], p["ms"])
            self.assertEqual(m["device"], "b1")
            self.assertEqual(m["epoch"], 7, "report's epoch replaces train's")
            self.assertEqual(m["seen_acc"], acc, "{train.acc} in report's argv")
            self.assertEqual(m["seen_time"], p["ms"], "{measure.time} in report's argv")
            self.assertTrue(m["env_agrees"], "CGQ_STAGE_TRAIN_ACC / _MEASURE_TIME as argv")
            self.assertEqual(m["stages_seen"], ["measure", "train"])
            stages = json.loads(h["stages"])
            self.assertEqual(list(stages), ["train", "measure", "report"])
            self.assertEqual(stages["train"], {"acc": acc, "epoch": 1})
            self.assertEqual(h.get("stage"), "2")
        job = c.redis.hgetall("cgq:job:{%d}" % j)
        best = max(range(len(want_values)), key=lambda i: want_values[i])
        self.assertAlmostEqual(float(job["best_value"]), want_values[best], places=6)
        # Each stage's process ran exactly once per trial.
        runs = self.runs()
        n = len(trials)
        self.assertEqual(sorted(int(r[1]) for r in runs if r[0] == "train"), list(range(n)))
        self.assertEqual(sorted(int(r[1]) for r in runs if r[0] == "report"), list(range(n)))
        self.assertEqual({r[3] for r in runs if r[0] == "train"}, {"train"})
        self.assertEqual({r[3] for r in runs if r[0] == "report"}, {"report"})
        with open(log) as f:
            self.assertEqual(sum(1 for _ in f), n * 3, "1 warm-up + 2 runs per measurement")
        return trials

    def test_three_stages_worker_device_worker(self):
        c = self.start_default(workers=(("w1", 2),))
        log = os.path.join(self.tmp, "device.log")
        self.start_runner(self.runner_yaml(log))
        xs, mss = (10, 30), (5, 8)
        j = c.submit(self.write_job(xs, mss))
        job = c.wait_job(j, 120)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "4", job)
        trials = self.check_results(j, xs, mss, log)
        for t, h in trials.items():
            # attempts count on across stages: one attempt per stage
            self.assertEqual(h.get("attempt"), "3", h)
        ev = [e for e in c.events(j) if e.get("type") == "trial.stage"]
        self.assertEqual(len(ev), 2 * 4, "two stage transitions per trial")
        # cgq results --format json: each stage's own metrics and the stage.
        r = c.cgq("results", j, "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        for t in json.loads(r.stdout)["trials"]:
            self.assertEqual(t["stage"], 2, t)
            self.assertEqual(sorted(t["stages"]), ["measure", "report", "train"], t)
            self.assertEqual(t["stages"]["train"]["acc"], t["metrics"]["acc"], t)
            self.assertEqual(t["stages"]["measure"]["time"], t["params"]["ms"], t)

    def test_kill9_between_stages(self):
        c = self.start_default(workers=(("w1", 2),))
        log = os.path.join(self.tmp, "device.log")
        xs, mss = (10, 20), (4, 6)
        j = c.submit(self.write_job(xs, mss))
        # No device runner yet: every trial's train stage runs and then
        # waits for the measure stage (the job says it is blocked).
        c.wait_value(lambda: sorted(h.get("stage", "0") for h in c.trials(j).values()),
                     lambda st: st == ["1"] * 4, 60, "4 trials waiting for stage measure")
        job = c.redis.hgetall("cgq:job:{%d}" % j)
        self.assertIn("needs device with device=fake-board", job.get("blocked", ""), job)
        for h in c.trials(j).values():
            self.assertEqual(json.loads(h["stages"])["train"]["epoch"], 1, h)
        c.coordinator.kill9()
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
                                   "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))
        self.start_runner(self.runner_yaml(log))
        job = c.wait_job(j, 120)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "4", job)
        self.check_results(j, xs, mss, log)
        ends = [e for e in c.events(j) if e.get("type") in ("trial.succeeded", "trial.failed")]
        self.assertEqual(sorted(int(e["trial"]) for e in ends), [0, 1, 2, 3], "each ends once")

    def test_assignment_env_template(self):
        c = self.start_default(workers=(("w1", 2),))
        items, choices = ["Conv2D", "Pool2D", "Reshape"], ["cpu", "acl_cl"]
        c.write_file("env.py", r'''
import json, os
p = json.loads(os.environ["CGQ_PARAMS"])["b"]
env = {k[len("OP_BACKEND_"):]: v for k, v in os.environ.items() if k.startswith("OP_BACKEND_")}
os.write(3, (json.dumps({"id": p["id"], "env": env}) + "\n").encode())
''')
        spec = c.write_file("assign.yaml", '''name: assign-env
space:
  b:
    assignment:
      items: [%s]
      choices: [%s]
      env: "OP_BACKEND_{item}={choice}"
search: {algorithm: grid}
objective: {metric: id, mode: max}
trial:
  command: python3 {spec_dir}/env.py
  resources: {cpu: 1}
''' % (", ".join(items), ", ".join(choices)))
        j = c.submit(spec)
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("succeeded"), "8", job)
        seen = set()
        for h in c.trials(j).values():
            m = metrics_of(h)
            aid = m["id"]
            seen.add(aid)
            # digit k (base 2, least significant first) picks item k's choice
            want = {op: choices[(aid >> k) & 1] for k, op in enumerate(items)}
            self.assertEqual(m["env"], want, h)
        self.assertEqual(seen, set(range(8)))


if __name__ == "__main__":
    main()
