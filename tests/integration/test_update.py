#!/usr/bin/env python3
"""`cgq update J --samples N --concurrency C` of a running job (issue 25):
the job runs the new total at the new concurrency, the values survive a
coordinator kill -9 and restart, a job.updated event is recorded, and what
cannot be done is refused with why (exit 2): samples below the trials
already suggested, an unknown job, a finished job, samples of a grid."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, endpoint_port, main  # noqa: E402

SPEC = """name: update-itest
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, samples: 6, concurrency: 2, seed: 1}
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/counted.py {spec_dir}/runs.txt 1.5
  resources: {cpu: 1}
"""


class UpdateTest(CgqTestCase):
    def running(self, c, j):
        return int(c.job(j).get("running") or 0)

    def test_update_running_job(self):
        c = self.start_default(workers=(("w1", 8),))
        c.write_counted_job("counted", 1, 0)  # writes counted.py (its spec unused)
        j = c.submit(c.write_file("update.yaml", SPEC))
        c.wait_for(lambda: self.running(c, j) == 2, 30, "2 trials to run (concurrency 2)")

        r = c.cgq("update", j, "--samples", "16", "--concurrency", "4")
        self.assertEqual(r.returncode, 0, "cgq update: %s %s" % (r.stdout, r.stderr))
        self.assertEqual(r.stdout.strip(), "job %d: samples 6 -> 16, concurrency 2 -> 4" % j)
        job = c.job(j)
        self.assertEqual((job.get("samples"), job.get("concurrency"), job.get("total")),
                         ("16", "4", "16"), job)
        # dispatch sees the new concurrency at once, and never goes above it
        c.wait_for(lambda: self.running(c, j) == 4, 20, "4 trials to run (concurrency 4)")

        # below the trials already suggested: refused, with the number
        r = c.cgq("update", j, "--samples", "1")
        self.assertEqual(r.returncode, 2, "%s %s" % (r.stdout, r.stderr))
        m = re.search(r"fewer than the (\d+) already suggested", r.stderr)
        self.assertTrue(m, r.stderr)
        self.assertGreaterEqual(int(m.group(1)), 4, r.stderr)
        self.assertEqual(c.job(j).get("samples"), "16", "a refused update changes nothing")

        # unknown job; nothing to update
        r = c.cgq("update", 999, "--samples", "5")
        self.assertEqual(r.returncode, 2, "%s %s" % (r.stdout, r.stderr))
        self.assertIn("no job 999", r.stderr)
        r = c.cgq("update", j)
        self.assertEqual(r.returncode, 2, "%s %s" % (r.stdout, r.stderr))

        # kill -9 and restart on the same ports: the job keeps 16 and 4
        c.coordinator.kill9()
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
                                   "--control",
                                   "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))
        r = c.cgq("update", j, "--concurrency", "4")
        self.assertEqual(r.returncode, 0, "cgq update: %s %s" % (r.stdout, r.stderr))
        self.assertEqual(r.stdout.strip(), "job %d: samples 16 -> 16, concurrency 4 -> 4" % j,
                         "the restarted coordinator has the updated values")
        peak = [0]

        def finished():
            peak[0] = max(peak[0], self.running(c, j))
            return c.job(j).get("state") == "finished"
        c.wait_for(finished, 60, "job %d to finish" % j)
        self.assertLessEqual(peak[0], 4, "never more running than the concurrency")
        job = c.job(j)
        self.assertEqual((job.get("succeeded"), job.get("total")), ("16", "16"), job)
        self.assertEqual(sorted({t for t, _ in c.counted_runs()}), list(range(16)),
                         "16 trials ran")

        ev = [e for e in c.events(j) if e.get("type") == "job.updated"]
        self.assertEqual([e.get("detail") for e in ev],
                         ["samples 6 -> 16, concurrency 2 -> 4",
                          "samples 16 -> 16, concurrency 4 -> 4"], ev)

        # a finished job is not reopened
        r = c.cgq("update", j, "--samples", "20")
        self.assertEqual(r.returncode, 2, "%s %s" % (r.stdout, r.stderr))
        self.assertIn("cannot be reopened", r.stderr)
        self.assertEqual(c.job(j).get("total"), "16")

        # a grid's trials are its points: samples refused, concurrency taken
        g = c.submit(c.write_file("grid.yaml", SPEC.replace("update-itest", "update-grid")
                                  .replace("x: {uniform: [0, 1]}", "x: {grid: [1, 2, 3]}")
                                  .replace("random, samples: 6", "grid")
                                  .replace("runs.txt 1.5", "runs.txt 30")))
        r = c.cgq("update", g, "--samples", "5")
        self.assertEqual(r.returncode, 2, "%s %s" % (r.stdout, r.stderr))
        self.assertIn("algorithm grid", r.stderr)
        r = c.cgq("update", g, "--concurrency", "0")
        self.assertEqual(r.returncode, 0, "%s %s" % (r.stdout, r.stderr))
        self.assertIn("concurrency 2 -> unlimited", r.stdout)
        self.assertEqual(c.cgq("cancel", g).returncode, 0)


if __name__ == "__main__":
    main()
