#!/usr/bin/env python3
"""d. Junk on fd 3 (not JSON, or JSON that is not an object) is ignored with
a warning in the trial's stderr log; the valid report after it is the result,
and the first rejected line is the trial's warning. A trial that reports only
junk fails with that line in its error (objective) or succeeds with a warning
(no objective)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, fnum, main, metrics_of  # noqa: E402

SCRIPT = r'''
import os
fd = int(os.environ["CGQ_REPORT_FD"])
os.write(fd, b"this is not json at all\n")
os.write(fd, b"[1, 2, 3]\n")
os.write(fd, b'{"score": 7.5, "epoch": 3}\n')
'''

SPEC = '''name: junk-itest
space:
  x: 1
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/junk.py
'''


class BadReportTest(CgqTestCase):
    def test_junk_line_ignored_with_warning(self):
        c = self.start_default()
        c.write_file("junk.py", SCRIPT)
        j = c.submit(c.write_file("junk.yaml", SPEC))
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        t = c.trial(j, 0)
        self.assertEqual(t.get("state"), "succeeded", t)
        self.assertEqual(fnum(t.get("value")), 7.5, t)
        self.assertEqual(metrics_of(t).get("score"), 7.5, t)
        self.assertEqual(fnum(job.get("best_value")), 7.5, job)

        d = os.path.join(c.workers["w1"].workdir, "job-%d" % j, "trial-0", "attempt-1")
        with open(os.path.join(d, "stderr.log"), errors="replace") as f:
            err = f.read()
        self.assertTrue(err.strip(), "stderr.log of the trial is empty; expected a warning about "
                        "the junk report line")
        # the script itself writes nothing on stderr: whatever is there is the warning
        self.assertRegex(err, r"(?i)json|report|ignor", "a warning about the bad line: %r" % err)
        self.assertIn(err.strip().splitlines()[0][:40], t.get("log", ""),
                      "the trial's log tail carries the warning: %r" % t)

        reports = [json.loads(e["r"]) for e in
                   c.redis.xrange("cgq:job:{%d}:reports:0" % j)]
        self.assertEqual(reports, [{"score": 7.5, "epoch": 3}], "only the valid report is stored")
        self.assertEqual(t.get("warning"),
                         "ignoring report line 1: not a JSON object: this is not json at all", t)

    def test_only_junk(self):
        c = self.start_default()
        c.write_file("garbage.sh", "echo 'score=0.5' >&3\n")
        j = c.submit(c.write_file("g.yaml", SPEC.replace("python3 {spec_dir}/junk.py",
                                                         "sh {spec_dir}/garbage.sh")))
        c.wait_job(j, 60)
        t = c.trial(j, 0)
        self.assertEqual(t.get("state"), "failed", t)
        self.assertIn("result has no numeric metric 'score' (metrics: none)", t.get("error", ""))
        self.assertIn("(the trial's first rejected report: ignoring report line 1: "
                      "not a JSON object: score=0.5)", t.get("error", ""))
        r = c.cgq("results", j, "--format", "json")
        self.assertIn("ignoring report line 1", json.loads(r.stdout)["trials"][0]["error"])

        # without an objective the trial succeeds, with a warning
        j = c.submit(c.write_file("g2.yaml", "name: g2\nspace: {x: 1}\n"
                                  "trial: {command: \"sh {spec_dir}/garbage.sh\"}\n"))
        c.wait_job(j, 60)
        t = c.trial(j, 0)
        self.assertEqual(t.get("state"), "succeeded", t)
        self.assertEqual(t.get("warning"), "the trial reported no metrics (write JSON objects to "
                         "fd 3 or result.json); ignoring report line 1: not a JSON object: "
                         "score=0.5", t)
        r = c.cgq("results", j)
        self.assertIn("warning: the trial reported no metrics", r.stdout)
        r = c.cgq("logs", j, 0)
        self.assertIn("warning: the trial reported no metrics", r.stdout)


if __name__ == "__main__":
    main()
