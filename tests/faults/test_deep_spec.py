#!/usr/bin/env python3
"""A deeply nested flow-style spec submitted mid-job (160 KB of '[' and of
'{a: ' nesting — libyaml's document loader was quadratic in it and stalled
the coordinator 36 s) is refused at once with the depth error, no node is
declared dead, and the running job is unaffected: every trial ends once."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import CgqTestCase, main  # noqa: E402

SPEC = '''name: deep-spec-fault
space:
  i: {grid: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}
objective: {metric: v, mode: max}
trial:
  command: "sleep 0.3; echo '{{\\"v\\": '{i}'}}' >&3"
  resources: {cpu: 1}
'''


class DeepSpecTest(CgqTestCase):
    def test_deep_spec_mid_job(self):
        c = self.start_default(workers=(("w1", 2), ("w2", 2)))
        j = c.submit(c.write_file("job.yaml", SPEC))
        c.wait_for(lambda: int(c.job(j).get("running", "0")) >= 2, 30, "trials to run")
        depth = 80000
        shapes = {
            "lists.yaml": "name: deep\nspace:\n  a: " + "[" * depth + "]" * depth + "\n",
            "maps.yaml": "name: deep\nspace:\n  a: " + "{a: " * depth + "1" + "}" * depth + "\n",
        }
        for name, text in shapes.items():
            path = c.write_file(name, text)
            t0 = time.monotonic()
            # The CLI parses it first with the same streaming parser the
            # coordinator uses (common/spec.c; spec_test times both shapes
            # at 100,000 levels), so this also bounds the CLI.
            r = c.cgq("submit", path, timeout=30)
            took = time.monotonic() - t0
            self.assertNotEqual(r.returncode, 0, "a %d-deep spec is refused" % depth)
            self.assertIn("deep", (r.stdout + r.stderr).lower(), r.stderr)
            self.assertLess(took, 5.0, "refused at once (took %.1f s)" % took)
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "12", job)
        ev = c.events()
        self.assertEqual([e for e in ev if e.get("type") in ("node.dead", "trial.lost")], [],
                         "no node declared dead, no trial lost")
        for t, h in c.trials(j).items():
            self.assertEqual(h.get("attempt"), "1", "trial %d: %s" % (t, h))


if __name__ == "__main__":
    main()
