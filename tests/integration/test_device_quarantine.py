#!/usr/bin/env python3
"""Quarantine, end to end: a device whose measurements fail or time out
--quarantine-after times in a row gets no more trials (its failed trials are
retried on the healthy device), `cgq devices` shows it quarantined with its
last error, the quarantine survives a coordinator restart (Redis), and
`cgq devices enable ID` returns it to service. The runner is
tests/integration/fakerunner.py (see test_device_exclusive.py for why)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakerunner import TASK_FAILED, TASK_SUCCEEDED, TASK_TIMEOUT, FakeRunner  # noqa: E402
from harness import CgqTestCase, main  # noqa: E402

SPEC = '''name: quarantine
space:
  x: {uniform: [0, 1]}
search: {samples: %d}
trial:
  on: {device: board}
  benchmark: sleep
  retries: 5
'''

DEVICES = {"good": {"device": "board"}, "bad": {"device": "board"}}


class DeviceQuarantineTest(CgqTestCase):
    def _devices(self, c):
        out = c.cgq("devices", "--format", "json")
        self.assertEqual(out.returncode, 0, out.stderr)
        return {d["id"]: d for d in json.loads(out.stdout)}

    def test_quarantine_survives_restart_until_enabled(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--quarantine-after", "2"))
        state = {"bad_fails": True, "n": 0}

        def behaviour(device, info):
            if device == "bad" and state["bad_fails"]:
                state["n"] += 1
                if state["n"] % 2:
                    return TASK_FAILED, 0.01, "exit status 1"
                return TASK_TIMEOUT, 0.01, "killed after 1s"
            return TASK_SUCCEEDED, 0.02, None

        r = FakeRunner(c.nodes_ep, "lab", DEVICES, behaviour)
        self.addCleanup(r.stop)
        j = c.submit(c.write_file("q.yaml", SPEC % 12))
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("succeeded"), "12", "failed trials were retried: %s" % job)
        bad_runs = [x for x in r.runs if x["device"] == "bad"]
        self.assertEqual(len(bad_runs), 2, "two failures in a row, then no more trials there")
        devs = self._devices(c)
        self.assertEqual(devs["bad"]["state"], "quarantined", devs["bad"])
        self.assertEqual(devs["bad"]["failures"], 2)
        self.assertEqual(devs["bad"]["last_error"], "timeout: killed after 1s")
        self.assertEqual(devs["good"]["state"], "idle")
        table = c.cgq("devices")
        self.assertRegex(table.stdout, r"(?m)^bad\s+lab\s+quarantined\s+-\s+2\s+device=board")
        ev = [e for e in c.events() if e.get("type") == "device.quarantined"]
        self.assertEqual(len(ev), 1, ev)

        # The coordinator restarts; the runner comes back (a new connection):
        # the quarantine is read back from Redis.
        r.stop()
        problem = c.coordinator.stop()
        self.assertFalse(problem, problem)
        c.procs.remove(c.coordinator)
        c.start_coordinator(extra=("--quarantine-after", "2"))
        state["bad_fails"] = False
        r2 = FakeRunner(c.nodes_ep, "lab", DEVICES, behaviour)
        self.addCleanup(r2.stop)
        c.wait_for(lambda: c.redis.hgetall("cgq:node:lab").get("state") == "alive", 20, "lab")
        j2 = c.submit(c.write_file("q2.yaml", SPEC % 6))
        c.wait_job(j2, 60)
        self.assertEqual([x["device"] for x in r2.runs], ["good"] * 6)
        self.assertEqual(self._devices(c)["bad"]["state"], "quarantined")

        out = c.cgq("devices", "enable", "nope")
        self.assertEqual(out.returncode, 2, out)
        self.assertIn("unknown device 'nope'", out.stderr)
        out = c.cgq("devices", "enable", "bad")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), "device bad is back in service")
        d = self._devices(c)["bad"]
        self.assertEqual((d["state"], d["failures"], d["quarantined"]), ("idle", 0, False), d)
        j3 = c.submit(c.write_file("q3.yaml", SPEC % 20))
        c.wait_job(j3, 60)
        self.assertIn("bad", [x["device"] for x in r2.runs[6:]], "bad takes trials again")
        out = c.cgq("devices", "enable", "bad")
        self.assertEqual(out.stdout.strip(), "device bad was not quarantined")


if __name__ == "__main__":
    main()
