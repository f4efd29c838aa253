#!/usr/bin/env python3
"""A device job that no device can run says so, gives up in time, and does
not lose the trial whose failure quarantined the device (issue 28): a real
Redis, coordinator and cgq-device-runner; the benchmark fails until a flag
file exists.

- blocked at once: `cgq submit --follow` prints "blocked: devices b1
  (quarantined: failed: benchmark flaky on b1: timed run 1: exit status 1 ...)" and `cgq status JOB` says it;
  with `blocked_timeout: 3s` the job fails, its error naming the device and
  its quarantine reason.
- the flag made and `cgq devices enable b1`: the trial that quarantined the
  device (its attempt not charged to its `retries: 1`) runs again and the job
  succeeds.
- with `check:` (failing too until the flag exists) and `--recheck 500ms`,
  the device returns on its own once the flag exists (device.enabled) and
  the job finishes; `cgq-device-runner check` runs the check by hand.
- the coordinator killed -9 twice while the job is blocked: the timeout
  counts from the first blocked time (the job hash's blocked_since), not from the
  restart."""

import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, Proc, binary, endpoint_port, main  # noqa: E402

SPEC = '''name: blocked
space:
  x: {uniform: [0, 1]}
search: {samples: 1}
%s
trial:
  on: {device: board}
  benchmark: flaky
  retries: 1
'''


class DeviceBlockedTest(CgqTestCase):
    def setUp(self):
        super().setUp()
        self.flag = os.path.join(self.tmp, "board-is-fine")

    def start(self, check=False, extra=()):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--quarantine-after", "2"))
        cfg = os.path.join(self.tmp, "runner.yaml")
        dev = "{id: b1, tags: {device: board}%s}" % (
            (", check: \"test -f '%s'\"" % self.flag) if check else "")
        with open(cfg, "w") as f:
            f.write("cache: {dir: %s}\n" % os.path.join(self.tmp, "cache") +
                    "devices:\n  - %s\n" % dev +
                    "benchmarks:\n  flaky:\n    command: \"test -f '%s'\"\n" % self.flag +
                    "    repeats: 1\n    warmup: 0\n    timeout: 10s\n")
        self.start_runner(cfg, extra)
        return c

    def start_runner(self, cfg, extra=()):
        c = self.cluster
        argv = [binary("cgq-device-runner"), "--config", cfg, "--coordinator", c.nodes_ep,
                "--id", "lab", "--workdir", os.path.join(self.tmp, "lab"), "--heartbeat", "200ms"]
        argv += list(extra)
        p = Proc("lab", argv, c.logdir)
        c.procs.append(p)
        c.wait_for(lambda: c.redis.hgetall("cgq:node:lab").get("state") == "alive", 30,
                   "runner lab alive")
        return p

    def wait_blocked(self, j):
        c = self.cluster
        return c.wait_value(lambda: c.job(j), lambda h: "quarantined" in (h.get("blocked") or ""),
                            20, "job %s blocked on its quarantined device" % j)

    def test_blocked_says_why_then_times_out(self):
        c = self.start()
        spec = c.write_file("s.yaml", SPEC % "blocked_timeout: 3s")
        t0 = time.time()
        out = c.cgq("submit", spec, "--follow", timeout=60)
        took = time.time() - t0
        self.assertRegex(out.stderr, r"cgq: job \d+ blocked: devices b1 \(quarantined: failed: "
                                     r"benchmark flaky on b1: timed run 1: exit status 1", out.stderr)
        self.assertLess(took, 30, "the job failed after its blocked_timeout, not later")
        j = int(re.search(r"submitted job (\d+)", out.stdout).group(1))
        job = c.job(j)
        self.assertEqual(job.get("state"), "failed", job)
        self.assertIn("blocked_timeout of 3s", job.get("error", ""))
        self.assertIn("devices b1 (quarantined: failed: benchmark flaky on b1: timed run 1: exit status 1", job.get("error", ""))
        self.assertNotIn("blocked", job, "a failed job is not blocked any more")
        self.assertNotIn("blocked_since", job)
        ev = [e for e in c.events() if e.get("type") == "job.failed"]
        self.assertEqual(len(ev), 1, ev)

    def test_enable_reruns_the_trial_that_quarantined_it(self):
        c = self.start()
        j = c.submit(c.write_file("s.yaml", SPEC % "blocked_timeout: never"))
        self.wait_blocked(j)
        st = c.cgq("status", str(j))
        self.assertIn("blocked: devices b1 (quarantined: failed: benchmark flaky on b1: timed run 1: exit status 1", st.stdout)
        time.sleep(1.5)  # blocked_timeout: never, so it waits
        self.assertEqual(c.job(j).get("state"), "running")
        with open(self.flag, "w"):
            pass
        out = c.cgq("devices", "enable", "b1")
        self.assertEqual(out.returncode, 0, out.stderr)
        job = c.wait_job(j, 30)
        self.assertEqual((job.get("state"), job.get("succeeded"), job.get("failed")),
                         ("finished", "1", "0"), job)
        t = list(c.trials(j).values())[0]
        # attempts 1 and 2 failed (the second quarantined b1 and was not
        # charged), the third succeeded
        self.assertEqual((t.get("state"), t.get("attempt")), ("succeeded", "3"), t)

    def test_device_returns_when_its_check_passes_again(self):
        c = self.start(check=True, extra=("--recheck", "500ms"))
        j = c.submit(c.write_file("s.yaml", SPEC % ""))
        job = self.wait_blocked(j)
        self.assertIn("check 'test -f", job["blocked"])
        time.sleep(1.5)  # rechecks fail meanwhile: it stays quarantined
        self.assertEqual(c.redis.hgetall("cgq:device:b1").get("state"), "quarantined")
        self.assertEqual(c.job(j).get("state"), "running")
        with open(self.flag, "w"):
            pass
        t0 = time.time()
        job = c.wait_job(j, 30)
        self.assertLess(time.time() - t0, 10, "back within a few rechecks")
        self.assertEqual((job.get("state"), job.get("succeeded"), job.get("failed")),
                         ("finished", "1", "0"), job)
        d = c.redis.hgetall("cgq:device:b1")
        self.assertEqual((d.get("state"), d.get("quarantined"), d.get("failures")),
                         ("idle", "0", "0"), d)
        ev = [e for e in c.events() if e.get("type") == "device.enabled"]
        self.assertEqual(len(ev), 1, ev)
        # the check mode, for trying a check by hand
        cfg = os.path.join(self.tmp, "runner.yaml")
        os.unlink(self.flag)
        out = subprocess.run([binary("cgq-device-runner"), "check", "--config", cfg, "--device",
                              "b1"], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 1, out)
        self.assertIn("device b1: check 'test -f", out.stderr)

    def test_timeout_counts_across_coordinator_kills(self):
        c = self.start()
        j = c.submit(c.write_file("s.yaml", SPEC % "blocked_timeout: 8s"))
        self.wait_blocked(j)
        since = float(c.job(j)["blocked_since"])
        same = ("--quarantine-after", "2",
                "--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
                "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep))
        # Killed twice: the second time soon after the first restart.
        for pause in (2, 1):
            c.coordinator.kill9()
            time.sleep(pause)
            restarted = time.time()
            c.start_coordinator(extra=same)
            time.sleep(1)
        self.assertEqual(float(c.job(j)["blocked_since"]), since, "kept, not rewritten")
        job = c.wait_job(j, 30, states=("finished", "cancelled", "failed"))
        self.assertEqual(job.get("state"), "failed", job)
        self.assertIn("blocked_timeout of 8s", job.get("error", ""))
        self.assertIn("b1 (quarantined:", job.get("error", ""))
        ended = float(job["finished"])
        self.assertGreaterEqual(ended, since + 8)
        self.assertLess(ended, restarted + 6,
                        "counted from the first blocked time (%.1f), not from the last restart "
                        "(%.1f)" % (since, restarted))
        t = list(c.trials(j).values())[0]
        self.assertEqual(t.get("state"), "cancelled", "the trial is accounted for, not lost: %s" % t)

if __name__ == "__main__":
    main()
