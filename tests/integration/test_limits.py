#!/usr/bin/env python3
"""Limits and confinement of hostile input (docs/security.md): each breach
gets its clear error, and nothing else changes.

- a spec over --max-spec: `cgq submit` is told the size and the limit at
  once (50 MB at the defaults, as issue 12 found it: it used to say only
  "cannot reach the coordinator"): the CLI's own check, and the
  coordinator's reply to a client without it; no job is created;
- a request past the control socket's own bound: the connection is closed,
  the coordinator stays up;
- Progress reports over --max-report or beyond --max-report-rate are not
  stored, are counted, and the trial's result is untouched;
- a search over --max-trials, or a trial with more params than --max-params,
  is refused at submit with the limit and its flag named; no job is created;
- a report line over the worker's --max-report-line is skipped with a
  warning naming the flag, trial logs stop at --log-cap with a marker naming
  it, and the trial's result is the same as without them;
- a worker with --allow-command runs what it allows and fails the rest,
  shell operators after an allowed prefix included, naming the flag; a
  `kind: predictor` trial runs only where the list allows `cgq-predictor`
  (the binary it execs), with the dataset directory if the prefix names one;
- trial directories are 0700 and logs 0600; a trial that plants a symbolic
  link where a later attempt's directory goes cannot make the worker write
  (or chmod) outside the work directory.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, CgqTestCase, ZmtpPeer, endpoint_port, main,  # noqa: E402
                     metrics_of, pb_submit, read_text)

PREDICTOR_DATA = os.path.join(REPO, "orchestration", "examples", "predictor", "data",
                              "cpu-local")
PREDICTOR = """\
name: %s
space:
  epochs: 1
  max_graphs: 40
  hidden: 8
search: {algorithm: grid}
objective: {metric: val_srcc, mode: max}
trial:
  kind: predictor
  data: "%s"
  resources: {cpu: 1}
  timeout: 1m
""" % ("%s", PREDICTOR_DATA)

SMALL = '''name: %s
space:
  x: {grid: [1, 2]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: %s
  resources: {cpu: 1}
  retries: %d
'''


def padded_spec(size):
    """A valid spec of about size bytes: the rest is one YAML comment line per KiB."""
    head = SMALL % ("big", "python3 -c pass", 0)
    line = "# " + "x" * 1021 + "\n"
    return head + line * max(0, (size - len(head)) // len(line))


class LimitsTest(CgqTestCase):
    def raw_submit(self, spec_yaml):
        """SubmitJob straight onto the control socket, as a REQ peer: what a
        client without the CLI's own checks sends. Returns the reply frame,
        or None when the coordinator closed the connection."""
        c = self.cluster
        peer = ZmtpPeer("127.0.0.1", endpoint_port(c.control_ep), socket_type=b"REQ",
                        timeout=20)
        try:
            peer.send([b"", pb_submit(spec_yaml)])
            return peer.recv()[-1]
        except (ConnectionError, OSError):
            return None
        finally:
            peer.close(0)

    def test_spec_over_the_default_limit(self):
        c = self.start_default(workers=())
        big = padded_spec(50 * 1000 * 1000)
        # the CLI refuses it itself, naming the limit
        r = c.cgq("submit", c.write_file("big.yaml", big), timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("the spec is longer than 1048576 bytes", r.stderr)
        self.assertIn("--max-spec", r.stderr)
        self.assertNotIn("cannot reach", r.stderr)
        # another client gets the coordinator's answer, not silence
        reply = self.raw_submit(big)
        self.assertIsNotNone(reply, "the coordinator answered")
        self.assertIn(b"request is 50 MB, over the 1 MiB limit of a spec (--max-spec", reply)
        self.assertEqual(c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1), [], "no job was created")
        self.assertTrue(c.coordinator.alive())
        r = c.cgq("submit", c.write_file("ok.yaml", SMALL % ("ok", "python3 -c pass", 0)))
        self.assertEqual(r.returncode, 0, "the coordinator still takes specs: %s" % r.stderr)

    def test_spec_limit_raised(self):
        c = self.start_default(workers=(), extra=("--max-spec", "3M"))
        spec = c.write_file("two.yaml", padded_spec(2 * 1024 * 1024))
        r = c.cgq("submit", spec)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("the spec is longer than 1048576 bytes", r.stderr)
        self.assertIn("--max-spec of cgq and of the coordinator", r.stderr)
        self.assertEqual(c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1), [])
        r = c.cgq("submit", "--max-spec", "3M", spec)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = c.cgq("validate", spec, env=c.cli_env(CGQ_MAX_SPEC="3M"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1)), 1)

    def test_spec_limits(self):
        c = self.start_default(workers=(), extra=("--max-spec", "16K"))
        # over --max-spec but within what is decoded: the parsed size is named
        r = c.cgq("submit", c.write_file("a.yaml", padded_spec(20 * 1024)))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr, r"spec is 2\d kB, over the 16 KiB limit \(--max-spec")
        # beyond what is decoded: the request's size is named, nothing decoded
        r = c.cgq("submit", c.write_file("b.yaml", padded_spec(200 * 1024)))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertRegex(r.stderr, r"request is 2\d\d kB, over the 16 KiB limit of a spec")
        # beyond the socket's own bound (64 x the decoded one): ZeroMQ closes
        # the connection; the coordinator stays up
        self.assertIsNone(self.raw_submit(padded_spec(6 * 1024 * 1024)))
        self.assertEqual(c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1), [])
        self.assertTrue(c.coordinator.alive())
        r = c.cgq("submit", c.write_file("ok.yaml", SMALL % ("ok", "python3 -c pass", 0)))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_trials_and_params_per_trial(self):
        c = self.start_default(workers=(), extra=("--max-trials", "10", "--max-params", "3"))
        r = c.cgq("submit", c.write_file("many.yaml", SMALL.replace(
            "x: {grid: [1, 2]}", "x: {grid: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]}")
            % ("many", "python3 -c pass", 0)))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("the search has 11 trials, more than the limit of 10", r.stderr)
        self.assertIn("--max-trials", r.stderr)
        wide = SMALL.replace("x: {grid: [1, 2]}", "x: {grid: [1, 2]}\n  a: 1\n  b: 2\n  c: 3")
        r = c.cgq("submit", c.write_file("wide.yaml", wide % ("wide", "python3 -c pass", 0)))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("a trial has 4 params, more than the limit of 3", r.stderr)
        self.assertIn("--max-params", r.stderr)
        self.assertEqual(c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1), [], "no job was created")
        # at the limits: accepted
        ok = SMALL.replace("x: {grid: [1, 2]}", "x: {grid: [1, 2]}\n  a: 1\n  b: 2")
        r = c.cgq("submit", c.write_file("ok.yaml", ok % ("ok", "python3 -c pass", 0)))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1)), 1)

    def test_report_line_and_log_caps(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.start_worker("w1", cpus=1, extra=("--max-report-line", "1K", "--log-cap", "4K"))
        c.write_file("loud.py", r'''
import json, os, sys
with os.fdopen(3, "w", buffering=1) as f:
    f.write(json.dumps({"blob": "y" * 2000}) + "\n")
    f.write(json.dumps({"score": 7}) + "\n")
sys.stdout.write("o" * 100000)
sys.stderr.write("e" * 100000)
''')
        spec = SMALL.replace("x: {grid: [1, 2]}", "x: {grid: [1]}") % (
            "loud", "python3 {spec_dir}/loud.py", 0)
        j = c.submit(c.write_file("loud.yaml", spec))
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("succeeded"), "1", job)
        t = c.trial(j, 0)
        self.assertEqual(metrics_of(t), {"score": 7}, "the long line is skipped, not the next")
        d = t.get("trial_dir") or t.get("dir")
        self.assertTrue(d and os.path.isdir(d), t)
        out = read_text(os.path.join(d, "stdout.log"))
        err = read_text(os.path.join(d, "stderr.log"))
        self.assertIn("[cgq: log truncated at 4096 bytes (--log-cap of the worker)]", out)
        self.assertLess(len(out), 4096 + 200)
        # the warning is the first thing in stderr.log, inside the cap
        self.assertIn("ignoring report line 1: longer than 1024 bytes (--max-report-line of "
                      "the worker)", err)
        self.assertLess(len(err), 4096 + 200)

    def test_progress_limits(self):
        c = self.start_default(workers=(("w1", 1),),
                               extra=("--max-report", "4K", "--max-report-rate", "5"))
        c.write_file("trial.py", r'''
import json, os
with os.fdopen(3, "w", buffering=1) as f:
    for i in range(3):
        f.write(json.dumps({"blob": "y" * 10000, "i": i}) + "\n")
    for i in range(100):
        f.write(json.dumps({"step": i, "score": i}) + "\n")
''')
        spec = SMALL.replace("x: {grid: [1, 2]}", "x: {grid: [1]}") % (
            "chatty", "python3 {spec_dir}/trial.py", 0)
        j = c.submit(c.write_file("chatty.yaml", spec))
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("succeeded"), "1", job)
        t = c.trial(j, 0)
        self.assertEqual(metrics_of(t), {"step": 99, "score": 99}, "the result is the last report")
        stored = c.redis.xrange("cgq:job:{%d}:reports:0" % j)
        self.assertTrue(all(len(e["r"]) < 4096 for e in stored), "no report over --max-report")
        self.assertTrue(5 <= len(stored) <= 20, "about a second's burst: %d stored" % len(stored))
        self.assertEqual(int(t.get("reports") or 0), len(stored))

        def dropped():
            return int(c.redis.hgetall("cgq:coordinator").get("reports_dropped") or 0)
        c.wait_for(lambda: dropped() == 103 - len(stored), 10,
                   "reports_dropped == %d (now %d)" % (103 - len(stored), dropped()))
        self.assertIn("report not stored", read_text(c.coordinator.err_path))

    def test_allow_command(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        ok = c.write_file("ok.py", "import os, json\nos.write(3, b'{\"score\": 1}\\n')\n")
        c.start_worker("w1", cpus=2, extra=("--allow-command", "python3 " + ok,
                                            "--allow-command", "/bin/true"))
        pwned = os.path.join(self.tmp, "PWNED")
        cases = [
            ("allowed", "python3 %s --x {x}" % ok, "succeeded", None),
            ("chained", "python3 %s; touch %s" % (ok, pwned), "failed",
             "goes on after its allowed prefix with a shell operator"),
            ("substituted", "python3 %s $(touch %s)" % (ok, pwned), "failed",
             "goes on after its allowed prefix"),
            ("other", "touch %s" % pwned, "failed", "does not start with any --allow-command"),
            ("lookalike", "python3 %s.evil" % ok, "failed", "does not start with any"),
        ]
        jobs = {}
        for name, cmd, _, _ in cases:
            jobs[name] = c.submit(c.write_file(name + ".yaml", SMALL % (name, cmd, 0)))
        for name, cmd, state, err in cases:
            c.wait_job(jobs[name], 60)
            for t, h in c.trials(jobs[name]).items():
                self.assertEqual(h.get("state"), state, "%s: %s" % (name, h))
                if err:
                    self.assertIn("command not allowed on this worker", h.get("error", ""))
                    self.assertIn(err, h.get("error", ""))
                    self.assertIn("'python3 %s'" % ok, h.get("error", ""), "names the prefixes")
        self.assertFalse(os.path.exists(pwned), "a refused command ran")

    def test_allow_command_covers_the_predictor_kind(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        cases = [
            # (allow-list, state, error)
            (("python3 /opt/train.py",), "failed", "allow it with --allow-command cgq-predictor"),
            (("cgq-predictor trial --data /elsewhere/",), "failed", "does not start with any"),
            (("python3 /opt/train.py", "cgq-predictor"), "succeeded", None),
            (("cgq-predictor trial --data %s/" % os.path.dirname(PREDICTOR_DATA),), "succeeded",
             None),
        ]
        for i, (allow, state, err) in enumerate(cases):
            extra = []
            for a in allow:
                extra += ["--allow-command", a]
            w = c.start_worker("p%d" % i, cpus=1, extra=tuple(extra))
            j = c.submit(c.write_file("p%d.yaml" % i, PREDICTOR % ("p%d" % i)))
            c.wait_job(j, 90)
            h = c.trial(j, 0)
            self.assertEqual(h.get("state"), state, "%s: %s" % (allow, h))
            if err:
                self.assertIn("command not allowed on this worker", h.get("error", ""))
                self.assertIn(err, h.get("error", ""))
                self.assertIn("cgq-predictor trial --data " + PREDICTOR_DATA, h.get("error", ""))
            else:
                self.assertIn("val_srcc", metrics_of(h))
            self.assertIsNone(w.stop())
            w.expect_exit = None  # stopped on purpose, not early
            c.wait_for(lambda: c.redis.hgetall("cgq:node:p%d" % i).get("state") != "alive", 20,
                       "worker p%d to leave" % i)

    def test_trial_dirs_are_private_and_links_do_not_escape(self):
        c = self.start_default()
        outside = os.path.join(self.tmp, "outside")
        os.makedirs(outside)
        os.chmod(outside, 0o755)
        # attempt 1 plants a link where attempt 2's directory goes, then fails
        c.write_file("plant.py", r'''
import os, sys
here = os.environ["CGQ_TRIAL_DIR"]
if os.environ["CGQ_ATTEMPT"] == "1":
    os.symlink(sys.argv[1], os.path.join(os.path.dirname(here), "attempt-2"))
    sys.exit(3)
''')
        j = c.submit(c.write_file("plant.yaml", SMALL.replace("x: {grid: [1, 2]}", "x: {grid: [1]}")
                                  % ("plant", "python3 {spec_dir}/plant.py " + outside, 1)))
        c.wait_job(j, 60)
        t = c.trial(j, 0)
        self.assertEqual((t.get("state"), t.get("attempt")), ("failed", "2"), t)
        self.assertIn("is a symbolic link; not running a trial there", t.get("error", ""))
        self.assertEqual(os.listdir(outside), [], "nothing was written through the link")
        self.assertEqual(os.stat(outside).st_mode & 0o777, 0o755, "nor chmod-ed")

        c.write_file("ok.py", "import os\nos.write(3, b'{\"score\": 2}\\n')\n")
        j = c.submit(c.write_file("ok.yaml", SMALL % ("ok", "python3 {spec_dir}/ok.py", 0)))
        c.wait_job(j, 60)
        for t, h in c.trials(j).items():
            self.assertEqual(h.get("state"), "succeeded", h)
            d = h["trial_dir"]
            self.assertEqual(os.stat(d).st_mode & 0o777, 0o700, d)
            for log in ("stdout.log", "stderr.log"):
                self.assertEqual(os.stat(os.path.join(d, log)).st_mode & 0o777, 0o600, log)


if __name__ == "__main__":
    main()
