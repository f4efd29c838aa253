#!/usr/bin/env python3
"""d. Junk on fd 3 (not JSON, or JSON that is not an object) is ignored with
a warning in the trial's stderr log; the valid report after it is the result."""

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


if __name__ == "__main__":
    main()
