#!/usr/bin/env python3
"""A coordinator killed with SIGKILL mid-search, an evolution job, a bayes
job, a tpe job, a multi-objective tpe (MOTPE) job and a cmaes job (numeric params: y a randint) running side by side, and restarted on the same ports: each
job resumes its search from Redis and ends with exactly its planned number of
trials, none suggested twice, none run twice (the trials running at the kill
are adopted), every trial ending once."""

import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, endpoint_port, main, params_of  # noqa: E402

SCRIPT = r'''
import json, os, sys, time
p = json.loads(os.environ["CGQ_PARAMS"])
with open(sys.argv[1], "a") as f:
    f.write("%s %s %s\n" % (os.environ["CGQ_JOB_ID"], os.environ["CGQ_TRIAL_ID"],
                            os.environ["CGQ_ATTEMPT"]))
time.sleep(0.15)
score = -(p["x"] - 0.3) ** 2 - 0.1 * (p["y"] - 2) ** 2
cost = p["x"] + 0.2 * p["y"]
os.write(3, (json.dumps({"score": score, "cost": cost}) + "\n").encode())
'''

SPEC = '''name: %s
space: {x: {uniform: [0, 1]}, y: {%s: [1, %s]}}
search: %s
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/trial.py {spec_dir}/runs.txt
  resources: {cpu: 1}
'''

JOBS = {
    "evolution": ("{algorithm: evolution, samples: 40, population: 8, initial: 8, batch: 4, "
                  "tournament: 3, seed: 5, concurrency: 2}", 40),
    "bayes": ("{algorithm: bayes, samples: 30, initial: 6, candidates: 200, seed: 3, "
              "concurrency: 2}", 30),
    "tpe": ("{algorithm: tpe, samples: 30, initial: 6, seed: 3, concurrency: 2}", 30),
    # Two objectives (score max, cost min): MOTPE, no leaderboard.
    "motpe": ("{algorithm: tpe, samples: 30, initial: 6, seed: 4, concurrency: 2}", 30),
    # lambda 6 (two params): generations of 6, two at a time, waits in between.
    "cmaes": ("{algorithm: cmaes, samples: 30, seed: 3, concurrency: 2}", 30),
}


class SearchRestartTest(CgqTestCase):
    def test_kill9_mid_evolution_bayes_tpe_motpe_and_cmaes(self):
        c = self.start_default(workers=(("w1", 2), ("w2", 2)))
        c.write_file("trial.py", SCRIPT)
        ids = {}
        for name, (search, _) in JOBS.items():
            y = ("randint", "3") if name == "cmaes" else ("choice", "2, 3")
            text = SPEC % ((name,) + y + (search,))
            if name == "motpe":
                text = text.replace("objective: {metric: score, mode: max}",
                                    "objectives: [{metric: score, mode: max}, "
                                    "{metric: cost, mode: min}]")
            ids[name] = c.submit(c.write_file(name + ".yaml", text))

        def done(j):
            h = c.job(j)
            return sum(int(h.get(k) or 0) for k in ("succeeded", "failed"))

        # Past the initial random points of both, into the learned part.
        c.wait_for(lambda: all(done(j) >= 12 for j in ids.values()), 90,
                   "12 trials of each job to finish")
        c.coordinator.kill9()
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
                                   "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))

        for name, (_, planned) in JOBS.items():
            j = ids[name]
            job = c.wait_job(j, 150)
            self.assertEqual(job.get("state"), "finished", "%s: %s" % (name, job))
            self.assertEqual(job.get("total"), str(planned), "%s: %s" % (name, job))
            self.assertEqual(job.get("succeeded"), str(planned), "%s: %s" % (name, job))
            trials = c.trials(j)
            self.assertEqual(sorted(trials), list(range(planned)), "%s: trial ids" % name)
            points = [json.dumps(params_of(h), sort_keys=True) for h in trials.values()]
            dup = [p for p, n in collections.Counter(points).items() if n > 1]
            self.assertEqual(dup, [], "%s: no point suggested twice" % name)
            ev = c.events(j)
            for t in trials:
                ends = [e["type"] for e in ev if e.get("trial") == str(t) and e.get("type") in
                        ("trial.succeeded", "trial.failed", "trial.cancelled")]
                self.assertEqual(ends, ["trial.succeeded"], "%s: trial %d ends once" % (name, t))
            board = 0 if name == "motpe" else planned  # several objectives: a front instead
            self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), board)

        with open(os.path.join(c.specdir, "runs.txt")) as f:
            runs = collections.Counter(tuple(line.split()[:2]) for line in f if line.strip())
        for name, (_, planned) in JOBS.items():
            j = str(ids[name])
            mine = {t: n for (jj, t), n in runs.items() if jj == j}
            self.assertEqual(sorted(map(int, mine)), list(range(planned)), "%s: runs" % name)
            twice = {t: n for t, n in mine.items() if n > 1}
            self.assertEqual(twice, {}, "%s: each trial's process ran once" % name)


if __name__ == "__main__":
    main()
