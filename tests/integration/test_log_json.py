#!/usr/bin/env python3
"""--log-format json on cgq-coordinator, cgq-worker and cgq-device-runner:
every stderr line of each is one JSON object with ts, level, program, pid and
msg, and every line about a trial carries integer job, trial and attempt
fields that name a real attempt of the job. In text format, the same lines
carry "job=J trial=T attempt=A". A bad --log-format stops start-up."""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, Proc, binary, main, read_text  # noqa: E402

SCRIPT = r'''
import json, os, sys
i = int(sys.argv[1])
if i == 1 and os.environ["CGQ_ATTEMPT"] == "1":
    # Fails once, then succeeds: a second attempt. Its stderr (quoted in the
    # error the worker logs) is not UTF-8: the JSON line must still come.
    sys.stderr.buffer.write(b"bad bytes \xff\xfe here\n")
    sys.exit(2)
os.write(3, (json.dumps({"v": i}) + "\n").encode())
'''

SPEC = '''name: logs
space:
  i: {grid: [0, 1, 2]}
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/t.py {i}
  resources: {cpu: 1}
  retries: 1
'''

DEVICE_SPEC = '''name: dev-logs
space:
  i: {grid: [0, 1]}
objective: {metric: time, mode: min}
trial:
  on: {device: fake-board}
  benchmark: sleep
  repeats: 2
  warmup: 1
  timeout: 30s
'''

# What makes a line trial-related when read as text: it talks of a task's or
# trial's ids the old way, or of an attempt.
TRIAL_WORDS = re.compile(r"\b(task|trial|attempt)\b", re.I)
NOT_TRIAL = re.compile(r"(\d+ running task|task\(s\)|trials confined|running tasks?\b"
                       r"|tasks go to it|no new tasks|resumed job|trial directories)", re.I)


class LogJsonTest(CgqTestCase):
    def json_lines(self, path, program):
        out = []
        for n, line in enumerate(read_text(path).splitlines(), 1):
            try:
                o = json.loads(line)
            except ValueError:
                self.fail("%s line %d is not JSON: %r" % (path, n, line))
            self.assertIsInstance(o, dict, line)
            for k in ("ts", "level", "program", "pid", "msg"):
                self.assertIn(k, o, "%s line %d lacks %s: %r" % (path, n, k, line))
            self.assertRegex(o["ts"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            self.assertIn(o["level"], ("debug", "info", "warn", "error"))
            self.assertEqual(o["program"], program, line)
            out.append(o)
        self.assertTrue(out, "%s logged nothing" % path)
        return out

    def check_ids(self, lines, attempts, what):
        """Lines with ids name a real attempt; lines that read like a trial's
        have ids. Returns how many lines carried ids."""
        with_ids = 0
        for o in lines:
            if "job" in o:
                with_ids += 1
                for k in ("job", "trial", "attempt"):
                    self.assertIsInstance(o.get(k), int, "%s: %s" % (what, o))
                self.assertIn((o["job"], o["trial"], o["attempt"]), attempts,
                              "%s: ids of an attempt that ran: %s" % (what, o))
            elif TRIAL_WORDS.search(o["msg"]) and not NOT_TRIAL.search(o["msg"]):
                self.fail("%s: a trial-related line without job/trial/attempt: %s" % (what, o))
        return with_ids

    def attempts(self, j):
        c = self.cluster
        out = set()
        for t, h in c.trials(j).items():
            for a in range(1, int(h.get("attempt") or 0) + 1):
                out.add((j, t, a))
        return out

    def test_json_logs_of_the_three_daemons(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--log-format", "json", "--log-level", "debug"))
        c.start_worker("w1", cpus=2, extra=("--log-format", "json", "--log-level", "debug"))
        c.write_file("t.py", SCRIPT)
        j = c.submit(c.write_file("logs.yaml", SPEC))
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("succeeded"), "3", job)
        self.assertEqual(c.trial(j, 1).get("attempt"), "2")

        # A device runner with one fake board.
        fake = binary("cgq-fake-device")
        cfg = os.path.join(self.tmp, "runner.yaml")
        with open(cfg, "w") as f:
            f.write("cache: {dir: %s, max_size: 16M}\n"
                    "devices:\n  - {id: b1, tags: {device: fake-board}}\n"
                    "benchmarks:\n  sleep:\n    command: [%s, --ms, '2']\n    timeout: 5s\n"
                    % (os.path.join(self.tmp, "cache"), fake))
        argv = [binary("cgq-device-runner"), "--config", cfg, "--coordinator", c.nodes_ep,
                "--id", "r1", "--workdir", os.path.join(self.tmp, "r1"), "--heartbeat", "200ms",
                "--log-format", "json", "--log-level", "debug"]
        runner = Proc("runner-r1", argv, c.logdir)
        c.procs.append(runner)
        c.wait_for(lambda: c.redis.hgetall("cgq:node:r1").get("state") == "alive", 30,
                   "runner r1 alive")
        d = c.submit(c.write_file("dev.yaml", DEVICE_SPEC))
        dj = c.wait_job(d, 60)
        self.assertEqual(dj.get("succeeded"), "2", dj)

        attempts = self.attempts(j) | self.attempts(d)
        # Stop the daemons so that their last lines are written too.
        for p in (runner, c.workers["w1"], c.coordinator):
            problem = p.stop()
            self.assertIsNone(problem, problem)

        coord = self.json_lines(c.coordinator.err_path, "cgq-coordinator")
        worker = self.json_lines(c.workers["w1"].err_path, "cgq-worker")
        dev = self.json_lines(runner.err_path, "cgq-device-runner")
        n_coord = self.check_ids(coord, attempts, "coordinator")
        n_worker = self.check_ids(worker, attempts, "worker")
        n_dev = self.check_ids(dev, attempts, "device runner")
        # Each daemon said something about trials: at debug the coordinator
        # logs each start and end; the worker each start and result; the
        # runner each measurement.
        self.assertGreaterEqual(n_coord, 2 * len(attempts), "coordinator lines with ids")
        self.assertGreaterEqual(n_worker, 2 * len(self.attempts(j)), "worker lines with ids")
        self.assertGreaterEqual(n_dev, 2, "runner lines with ids")
        # The failed first attempt of trial 1 is told as such, with its attempt.
        self.assertTrue(any(o.get("trial") == 1 and o.get("attempt") == 1 and o["job"] == j
                            and "fail" in o["msg"].lower() for o in worker),
                        "the worker logs trial 1's failed attempt 1")
        retry = [o for o in coord if o.get("trial") == 1 and o.get("attempt") == 1
                 and "retrying" in o["msg"]]
        self.assertEqual(len(retry), 1, "the coordinator logs the retry once, bytes that are "
                         "not UTF-8 in its error included")
        self.assertIn("bad bytes ?? here", retry[0]["msg"])

    def test_text_lines_carry_ids_and_bad_format_refused(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--log-level", "debug"))
        c.start_worker("w1", cpus=1)
        c.write_file("t.py", SCRIPT)
        j = c.submit(c.write_file("logs.yaml", SPEC))
        c.wait_job(j, 60)
        text = read_text(c.workers["w1"].err_path)
        self.assertRegex(text, r"info: job=%d trial=1 attempt=2: started pid \d+" % j)
        text = read_text(c.coordinator.err_path)
        self.assertRegex(text, r"debug: job=%d trial=0 attempt=1: started on w1" % j)
        self.assertRegex(text, r"debug: job=%d trial=0 attempt=1: succeeded" % j)

        for prog in ("cgq-coordinator", "cgq-worker", "cgq-device-runner"):
            r = subprocess.run([binary(prog), "--log-format", "yaml"], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 2, "%s: %s" % (prog, r.stderr))
            self.assertIn("--log-format: 'yaml' is not a format (text or json)", r.stderr, prog)


if __name__ == "__main__":
    main()
