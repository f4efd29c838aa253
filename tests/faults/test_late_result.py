#!/usr/bin/env python3
"""First outcome wins. A worker is paused (SIGSTOP) past the heartbeat
timeout while its trial runs: the coordinator declares it dead and runs the
trial again elsewhere as attempt 2. The trial's own process was not paused
and finishes; when the worker is continued it reports that success. The late
success is recorded (attempt 1) — or, when the worker's Hello still lists
attempt 1 as running, attempt 1 is adopted back — and attempt 2 is stopped, and the trial ends
once: one trial.succeeded, one leaderboard entry, the second run did not
complete."""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import CgqTestCase, main  # noqa: E402

SCRIPT = r'''
import json, os, sys, time
runs = sys.argv[1]
with open(runs, "a") as f:
    f.write("start %s\n" % os.environ["CGQ_ATTEMPT"])
# A re-run takes longer, so that the late result surely arrives first.
time.sleep(float(sys.argv[2]) * (1 if os.environ["CGQ_ATTEMPT"] == "1" else 4))
with open(runs, "a") as f:
    f.write("end %s\n" % os.environ["CGQ_ATTEMPT"])
os.write(3, (json.dumps({"v": int(os.environ["CGQ_ATTEMPT"])}) + "\n").encode())
'''

SPEC = '''name: late-result
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/t.py {spec_dir}/runs.txt 3
  resources: {cpu: 1}
'''


class LateResultTest(CgqTestCase):
    def test_late_success_wins_and_stops_the_rerun(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()  # heartbeat 200 ms x 5: silent 1 s is dead
        w1 = c.start_worker("w1", cpus=1)
        c.write_file("t.py", SCRIPT)
        j = c.submit(c.write_file("late.yaml", SPEC))
        c.wait_value(lambda: c.trials(j).get(0, {}).get("node"), lambda n: n == "w1", 20,
                     "the trial to run on w1")
        os.kill(w1.pid, signal.SIGSTOP)
        try:
            c.wait_for(lambda: any(e.get("type") == "trial.lost" for e in c.events(j)), 20,
                       "w1 to be declared dead and its trial lost")
            w2 = c.start_worker("w2", cpus=1)
            c.wait_value(lambda: c.trials(j)[0], lambda h: h.get("attempt") == "2"
                         and h.get("state") == "running", 20, "attempt 2 to run on w2")
            # Attempt 1's process ends meanwhile (only its worker is paused).
            c.wait_for(lambda: "end 1" in open(os.path.join(c.specdir, "runs.txt")).read(), 20,
                       "attempt 1's script to finish")
        finally:
            os.kill(w1.pid, signal.SIGCONT)
        job = c.wait_job(j, 30)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "1", job)
        h = c.trials(j)[0]
        self.assertEqual((h.get("state"), h.get("attempt")), ("succeeded", "1"), h)
        self.assertEqual(h.get("value"), "1", "attempt 1's metrics are the result: %s" % h)
        ev = c.events(j)
        # Either the success came first (trial.late_result), or the node's
        # Hello still listed attempt 1 as running (adopted back): attempt 2
        # is withdrawn either way.
        late = [e for e in ev if e.get("type") in ("trial.late_result", "trial.adopted")
                and "attempt 2 is stopped" in e.get("detail", "")]
        self.assertEqual(len(late), 1, ev)
        self.assertEqual(len([e for e in ev if e.get("type") == "trial.succeeded"]), 1, ev)
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), 1)
        # Attempt 2 was stopped before its end.
        c.wait_for(lambda: not any(h.get("state") == "running" for h in c.trials(j).values()), 5,
                   "nothing running")
        c.wait_for(lambda: "an earlier attempt" in open(w2.err_path).read(), 10,
                   "w2 to stop attempt 2")
        time.sleep(1.0)
        with open(os.path.join(c.specdir, "runs.txt")) as f:
            lines = f.read().split()
        runs = [" ".join(lines[i:i + 2]) for i in range(0, len(lines), 2)]
        self.assertEqual(sorted(runs), ["end 1", "start 1", "start 2"], runs)
        self.assertEqual(w2.alive(), True)


if __name__ == "__main__":
    main()
