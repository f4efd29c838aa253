#!/usr/bin/env python3
"""Warm starts (search.warm_start): `cgq submit` resolves jobs: and points:
into the SubmitJob; the coordinator feeds them to the tpe searcher before
its first suggestion, keeps them in Redis (cgq:job:{J}:warm) and feeds them
again after a restart.

- A tpe job warm-started from a finished random-search job of the same
  space suggests, as its very first trial, a model point near the optimum
  (not the random point the same spec suggests cold), and runs only its own
  samples (the warm points are not run again).
- A coordinator killed with SIGKILL mid-way through the warm-started job
  resumes it: the job ends with exactly its samples.
- cmaes and evolution warm-started from that job, each killed with
  SIGKILL mid-way (evolution's saved state holds warm members of its
  population, "warm": [[position, point]]): each resumes and ends with
  exactly its samples (search_cmaes_test and searcher_test show what the
  warm points do to the search).
- Hostile: a job that does not exist, a job of another space, a points
  file with a bad line (FILE:LINE), a points value outside the space.
"""

import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, endpoint_port, main, params_of  # noqa: E402

SCRIPT = r'''
import json, os, sys, time
p = json.loads(os.environ["CGQ_PARAMS"])
with open(sys.argv[1], "a") as f:
    f.write("%s %s\n" % (os.environ["CGQ_JOB_ID"], os.environ["CGQ_TRIAL_ID"]))
time.sleep(float(sys.argv[2]))
x1, x2 = p.get("x1", 0.0), p.get("x2", 0.0)
f = (x1 - 2) ** 2 + (x2 - 7) ** 2 + p.get("z", 0.0)
os.write(3, (json.dumps({"f": f}) + "\n").encode())
'''

SPEC = '''name: %s
space: %s
search: %s
objective: {metric: f, mode: min}
trial:
  command: python3 {spec_dir}/trial.py {spec_dir}/runs.txt %s
  resources: {cpu: 1}
'''

SPACE = "{x1: {uniform: [-5, 10]}, x2: {uniform: [0, 15]}}"


def dist(p):
    return math.hypot(p["x1"] - 2, p["x2"] - 7)


class WarmStartTest(CgqTestCase):
    def _spec(self, c, name, search, space=SPACE, delay="0.01"):
        return c.write_file(name + ".yaml", SPEC % (name, space, search, delay))

    def _refused(self, c, path, *fragments):
        r = c.cgq("submit", path)
        self.assertNotEqual(r.returncode, 0, "submitted: %s %s" % (r.stdout, r.stderr))
        for f in fragments:
            self.assertIn(f, r.stderr)
        return r.stderr

    def test_warm_start_from_a_job_and_a_file(self):
        c = self.start_default(workers=(("w1", 2),))
        c.write_file("trial.py", SCRIPT)
        a = c.submit(self._spec(c, "seen", "{algorithm: random, samples: 60, seed: 4, "
                                             "concurrency: 2}"))
        self.assertEqual(c.wait_job(a, 90).get("state"), "finished")
        seen = [params_of(h) for h in c.trials(a).values()]

        # Cold, the first suggestion is tpe's first random point.
        cold = c.submit(self._spec(c, "cold", "{algorithm: tpe, samples: 1, seed: 9}"))
        self.assertEqual(c.wait_job(cold, 60).get("state"), "finished")
        cold_first = params_of(c.trials(cold)[0])

        r = c.cgq("submit", self._spec(c, "warm", "{algorithm: tpe, samples: 6, seed: 9, "
                                                   "concurrency: 1, warm_start: {jobs: [%d]}}" % a))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("60 observation(s) from job %d" % a, r.stderr)
        w = int(r.stdout.split("job")[1].split()[0])
        job = c.wait_job(w, 90)
        self.assertEqual(job.get("state"), "finished", job)
        trials = c.trials(w)
        self.assertEqual(sorted(trials), list(range(6)), "only its own samples ran")
        first = params_of(trials[0])
        self.assertNotEqual(first, cold_first, "the first suggestion is the model's, not random")
        mean_seen = sum(map(dist, seen)) / len(seen)
        self.assertLess(dist(first), 3.0, "near the optimum (random points average %.2f): %s"
                        % (mean_seen, first))
        with open(os.path.join(c.specdir, "runs.txt")) as f:
            runs = [line.split() for line in f if line.strip()]
        self.assertEqual(sum(1 for j, _ in runs if j == str(w)), 6, "warm points not run again")
        kept = json.loads(c.redis.cmd("GET", "cgq:job:{%d}:warm" % w))
        self.assertEqual(len(kept), 60)
        self.assertEqual(kept[0]["from"].split()[:2], ["job", str(a)])

        # Points from a file: JSON lines; comments and blank lines skipped;
        # a param not in the space is noted and ignored.
        lines = ["# seen elsewhere", ""]
        lines += [json.dumps({"params": {"x1": p["x1"], "x2": p["x2"], "gone": 1},
                              "metrics": {"f": dist(p) ** 2}}) for p in seen[:20]]
        c.write_file("seen.jsonl", "\n".join(lines) + "\n")
        r = c.cgq("submit", self._spec(c, "file", "{algorithm: tpe, samples: 2, seed: 9, "
                                                   "warm_start: {points: seen.jsonl}}"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("params not in this space, ignored: gone", r.stderr)
        self.assertIn("20 observation(s) from", r.stderr)
        self.assertEqual(c.wait_job(int(r.stdout.split("job")[1].split()[0]), 60).get("state"),
                         "finished")

        # Hostile.
        self._refused(c, self._spec(c, "nojob", "{algorithm: tpe, warm_start: {jobs: [999]}}"),
                      "search.warm_start.jobs: job 999 does not exist")
        other = c.submit(self._spec(c, "other", "{algorithm: random, samples: 3}",
                                    space="{z: {uniform: [0, 1]}}"))
        self.assertEqual(c.wait_job(other, 60).get("state"), "finished")
        self._refused(c, self._spec(c, "otherspace", "{algorithm: tpe, warm_start: {jobs: [%d]}}"
                                    % other),
                      "job %d searched another space: no param in common" % other, "its params: z")
        bad = lines[:4] + ["{\"params\": {\"x1\": 1}}"] + lines[4:6]
        c.write_file("bad.jsonl", "\n".join(bad) + "\n")
        self._refused(c, self._spec(c, "badline", "{algorithm: tpe, warm_start: {points: "
                                                  "bad.jsonl}}"),
                      "bad.jsonl:5: a point needs \"params\" and \"metrics\"")
        c.write_file("out.jsonl", lines[2] + "\n" + json.dumps(
            {"params": {"x1": 50, "x2": 1}, "metrics": {"f": 1}}) + "\n")
        self._refused(c, self._spec(c, "outside", "{algorithm: tpe, warm_start: {points: "
                                                  "out.jsonl}}"),
                      "out.jsonl:2:", "x1")
        c.write_file("notjson.jsonl", "{nope\n")
        self._refused(c, self._spec(c, "notjson", "{algorithm: tpe, warm_start: {points: "
                                                  "notjson.jsonl}}"),
                      "notjson.jsonl:1: not JSON")
        self._refused(c, self._spec(c, "nofile", "{algorithm: tpe, warm_start: {points: "
                                                 "missing.jsonl}}"),
                      "search.warm_start.points: cannot read", "missing.jsonl")

    def test_a_client_that_does_not_resolve_is_refused(self):
        # A SubmitJob with the spec alone: the coordinator refuses a
        # warm_start it was not given the observations of (sent raw through
        # the Python client, whose submit() resolves it: there, a job that
        # does not exist is its own SpecError). The client needs
        # python3-redis and python3-protobuf: Debian's Python has them.
        py = "/usr/bin/python3"
        if subprocess.run([py, "-c", "import redis, google.protobuf"],
                          capture_output=True).returncode != 0:
            self.skipTest("no %s with redis and protobuf for the Python client" % py)
        c = self.start_default(workers=(("w1", 1),))
        path = self._spec(c, "py", "{algorithm: tpe, warm_start: {jobs: [1]}}")
        client = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients",
                              "python")
        script = ("import sys; sys.path.insert(0, sys.argv[1]); import cgq\n"
                  "c = cgq.Client(redis=sys.argv[2], coordinator=sys.argv[3])\n"
                  "text = open(sys.argv[4]).read()\n"
                  "m = c.pb2.SubmitJob(spec_yaml=text, spec_path=sys.argv[4], spec_dir='/tmp')\n"
                  "r = c.request('submit_job', m, check=False)\n"
                  "print(r.reply.code, r.reply.message)\n"
                  "try:\n"
                  "    c.submit(sys.argv[4])\n"
                  "except cgq.SpecError as e:\n"
                  "    print(e); sys.exit(3)\n")
        r = subprocess.run([py, "-c", script, client, c.redis_url, c.control_ep, path],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn("2 %s: search.warm_start is resolved by the submitting client" % path,
                      r.stdout)
        self.assertIn("search.warm_start.jobs: job 1 does not exist", r.stdout)
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:jobs"), 0)

    def test_warm_started_job_survives_a_kill(self):
        c = self.start_default(workers=(("w1", 1),))
        c.write_file("trial.py", SCRIPT)
        a = c.submit(self._spec(c, "seen", "{algorithm: random, samples: 30, seed: 2}"))
        self.assertEqual(c.wait_job(a, 90).get("state"), "finished")
        w = c.submit(self._spec(c, "warm", "{algorithm: tpe, samples: 8, seed: 3, concurrency: 1, "
                                           "warm_start: {jobs: [%d]}}" % a, delay="0.3"))
        c.wait_for(lambda: int(c.job(w).get("succeeded") or 0) >= 3, 60, "3 warm trials done")
        c.coordinator.kill9()
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
                                   "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))
        job = c.wait_job(w, 90)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "8", job)
        self.assertEqual(sorted(c.trials(w)), list(range(8)))

    def test_cmaes_and_evolution_warm_started_survive_a_kill(self):
        c = self.start_default(workers=(("w1", 1),))
        c.write_file("trial.py", SCRIPT)
        a = c.submit(self._spec(c, "seen", "{algorithm: random, samples: 30, seed: 2}"))
        self.assertEqual(c.wait_job(a, 90).get("state"), "finished")
        for alg, extra in (("cmaes", "popsize: 4"), ("evolution", "population: 6, initial: 6")):
            w = c.submit(self._spec(c, "warm" + alg, "{algorithm: %s, samples: 10, seed: 3, "
                                                   "concurrency: 1, %s, warm_start: {jobs: [%d]}}"
                                    % (alg, extra, a), delay="0.2"))
            c.wait_for(lambda: int(c.job(w).get("succeeded") or 0) >= 3, 60, "3 trials done")
            st = json.loads(c.job(w).get("searcher") or "{}")
            if alg == "evolution":
                # 30 warm points, population 6: all of it warm until children come back
                self.assertIn("warm", st, st)
            c.coordinator.kill9()
            c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
                                       "--control",
                                       "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))
            job = c.wait_job(w, 90)
            self.assertEqual(job.get("state"), "finished", job)
            self.assertEqual(job.get("succeeded"), "10", job)
            self.assertEqual(sorted(c.trials(w)), list(range(10)))


if __name__ == "__main__":
    main()
