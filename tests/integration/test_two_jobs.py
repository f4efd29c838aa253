#!/usr/bin/env python3
"""g. Two jobs submitted at once share two workers fairly: among the first
trials started, both jobs are represented about equally; both finish."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, binary, fnum, main  # noqa: E402

SCRIPT = "import os, time; time.sleep(0.3); os.write(3, b'{\"score\": 1}\\n')\n"

SPEC = '''name: share-{n}
space:
  i: {{grid: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}}
search: {{algorithm: grid}}
objective: {{metric: score, mode: max}}
trial:
  command: python3 {{spec_dir}}/nap.py
  resources: {{cpu: 1}}
'''


class TwoJobsTest(CgqTestCase):
    def test_two_jobs_share_workers(self):
        c = self.start_default(workers=(("w1", 1), ("w2", 1)))
        c.write_file("nap.py", SCRIPT)
        paths = [c.write_file("share%d.yaml" % n, SPEC.format(n=n)) for n in (1, 2)]
        # submit both at the same moment
        procs = [subprocess.Popen([binary("cgq"), "submit", p], env=c.cli_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for p in paths]
        for p in procs:
            out, err = p.communicate(timeout=30)
            self.assertEqual(p.returncode, 0, err)
        jobs = sorted(int(x) for x in c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1))
        self.assertEqual(len(jobs), 2, jobs)
        for j in jobs:
            job = c.wait_job(j, 90)
            self.assertEqual(job.get("state"), "finished", job)
            self.assertEqual(job.get("succeeded"), "10", job)

        starts = []
        for j in jobs:
            for t, h in c.trials(j).items():
                starts.append((fnum(h["started"]), j, t))
        starts.sort()
        first = [j for _, j, _ in starts[:10]]
        counts = {j: first.count(j) for j in jobs}
        # 2 slots: the job that arrives first may take both, after that they alternate
        for j in jobs:
            self.assertGreaterEqual(counts[j], 3, "job %d among the first 10 trials started: %s "
                                    "(order: %s)" % (j, counts, [j for _, j, _ in starts]))


if __name__ == "__main__":
    main()
