#!/usr/bin/env python3
"""The trial helpers (clients/) and the example specs, end to end.

- A Python trial using a copy of clients/python/cgq/trial.py (as cgq.py,
  the one file alone) reports several epochs: every report arrives, in
  order, in cgq:job:{J}:reports:T, and the trial's metrics are what
  cgq.result() wrote (result.json beats the last report). The examples'
  trials below import the package cgq from clients/python instead.
- A trial compiled from a C source including clients/c/cgq_report.h (with cc,
  and the same source as C++ when a C++ compiler is there) reports several
  epochs the same way; its last line is its result. Without a C compiler this
  part is skipped and the file exits 77 after the rest has run.
- Outside cgq the helpers degrade: reports go to stderr, params come from
  NAME=VALUE arguments, result() writes no file, a CGQ_REPORT_FD that is not
  open falls back to stderr; cgq_report.py (the old name) still prints to
  stdout, as the quickstart's docstring says.
- `cgq run` of orchestration/examples/predictor-tuning and eval-grid, in a
  temporary copy: exit 0, every trial succeeded, the metrics they promise.
"""

import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, SANITIZER_MARKS, SPEED, SUBREAPER, CgqTestCase, binary,  # noqa: E402
                     fnum, metrics_of, my_children, params_of, proc_cmdline)
import unittest  # noqa: E402

CLIENTS = os.path.join(REPO, "clients")
NO_CC = []  # the reason the C part was skipped, when it was

PY_TRIAL = r'''
import math, os, sys
import cgq                                  # the copy beside this script

p = cgq.params()
k, n = p["k"], p["epochs"]
for e in range(1, n + 1):
    cgq.report(epoch=e, val_loss=1.0 / (e + k), nan=float("nan"), k=k)
cgq.report({"phase/name": "done", "k": k})   # the dict form; not the result
path = cgq.result(val_loss=1.0 / (n + k), epochs=n, k=k, source="result.json")
if cgq.in_cgq():
    assert path == os.path.join(os.environ["CGQ_TRIAL_DIR"], "result.json"), path
    assert cgq.trial_dir() == os.environ["CGQ_TRIAL_DIR"]
    assert os.path.isfile(path)
else:
    assert path is None, path
print("trial k=%s done" % k)
'''

PY_SPEC = '''name: clients-python
space:
  k: {grid: [1, 2]}
  epochs: 5
search: {algorithm: grid}
objective: {metric: val_loss, mode: min}
trial:
  command: python3 {spec_dir}/py_trial.py
  resources: {cpu: 1}
  timeout: 1m
'''

C_TRIAL = r'''
/* a trial in C (and, compiled as C++, in C++) reporting through cgq_report.h */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cgq_report.h"

int main (int argc, char **argv)
{
    const char *lang = argc > 1 ? argv[1] : "?";
    const char *s = getenv ("CGQ_PARAM_EPOCHS");
    int epochs = s ? atoi (s) : 3;
    double loss = 1.0, zero = 0.0;
    char big[6000];
    cgq_line_t l;
    int e, rejected;

    for (e = 1; e <= epochs; e++) {
        loss *= 0.5;
        cgq_line_begin (&l);
        cgq_line_int (&l, "epoch", e);
        cgq_line_num (&l, "val_loss", loss);
        cgq_line_str (&l, "lang", lang);
        if (cgq_line_send (&l) != 0) {
            perror ("cgq_line_send");
            return 1;
        }
    }
    /* the printf-like form and a one-metric line */
    if (cgq_report ("{\"note\": \"%s\", \"epochs\": %d}", "almost done", epochs) != 0)
        return 1;
    if (cgq_report_num ("epoch", epochs) != 0)
        return 1;
    /* a line too long for CGQ_REPORT_MAX is refused whole, nothing written */
    memset (big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    errno = 0;
    rejected = cgq_report ("{\"big\": \"%s\"}", big) == -1 && errno == EMSGSIZE;
    cgq_line_begin (&l);
    cgq_line_str (&l, "big", big);
    rejected = rejected && cgq_line_send (&l) == -1 && errno == EMSGSIZE;
    /* the last line is the result */
    cgq_line_begin (&l);
    cgq_line_num (&l, "val_loss", loss);
    cgq_line_int (&l, "epochs", epochs);
    cgq_line_str (&l, "lang", lang);
    cgq_line_str (&l, "quote", "a \"b\"\tc\\");
    cgq_line_num (&l, "nan", zero / zero);
    cgq_line_bool (&l, "oversize_rejected", rejected);
    return cgq_line_send (&l) == 0 ? 0 : 1;
}
'''

C_SPEC = '''name: clients-c
space:
  lang: {grid: [%s]}
  epochs: 4
search: {algorithm: grid}
objective: {metric: val_loss, mode: min}
trial:
  command: ["{spec_dir}/trial_{lang}", "{lang}"]
  resources: {cpu: 1}
  timeout: 1m
'''


def find_compiler(env_name, names):
    for name in [os.environ.get(env_name)] + names:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def compile_trial(tmpdir):
    """Builds trial_c (and trial_cxx when a C++ compiler exists) in tmpdir;
    returns the languages built. Skips (and records why) without cc."""
    cc = find_compiler("CC", ["cc", "gcc", "clang"])
    if cc is None:
        reason = "no C compiler (cc, gcc, clang or $CC) to build a trial using clients/c/cgq_report.h"
        if reason not in NO_CC:
            NO_CC.append(reason)
        raise unittest.SkipTest(reason)
    src = os.path.join(tmpdir, "trial.c")
    with open(src, "w") as f:
        f.write(C_TRIAL)
    inc = os.path.join(CLIENTS, "c")
    builds = [("c", [cc, "-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-I", inc,
                     src, "-o", os.path.join(tmpdir, "trial_c")])]
    cxx = find_compiler("CXX", ["c++", "g++", "clang++"])
    if cxx is not None:
        builds.append(("cxx", [cxx, "-std=c++11", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
                               "-I", inc, "-x", "c++", src, "-o",
                               os.path.join(tmpdir, "trial_cxx")]))
    for lang, argv in builds:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=120 * SPEED)
        if r.returncode != 0:
            raise AssertionError("compiling the %s trial failed:\n$ %s\n%s%s" % (
                lang, " ".join(argv), r.stdout, r.stderr))
    return [lang for lang, _ in builds]


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CGQ_")}
    env.update(extra)
    return env


def json_lines(text):
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


class ClientsTest(CgqTestCase):
    def reports(self, j, t):
        return [json.loads(e["r"]) for e in
                self.cluster.redis.xrange("cgq:job:{%d}:reports:%d" % (j, t))]

    def test_python_trial_reports(self):
        c = self.start_default(workers=(("w1", 2),))
        # usable by copying: the one file, as cgq.py beside the script
        shutil.copy(os.path.join(CLIENTS, "python", "cgq", "trial.py"),
                    os.path.join(c.specdir, "cgq.py"))
        c.write_file("py_trial.py", PY_TRIAL)
        j = c.submit(c.write_file("py.yaml", PY_SPEC))
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "2", job)

        trials = c.trials(j)
        self.assertEqual(sorted(trials), [0, 1])
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
            k = params_of(h)["k"]
            reps = self.reports(j, t)
            self.assertEqual(len(reps), 6, "5 epochs + 1 dict report: %s" % reps)
            self.assertEqual([r.get("epoch") for r in reps[:5]], [1, 2, 3, 4, 5], reps)
            for e, r in enumerate(reps[:5], 1):
                self.assertAlmostEqual(r["val_loss"], 1.0 / (e + k), 12, r)
                self.assertIsNone(r["nan"], "NaN is reported as null: %s" % r)
                self.assertEqual(r["k"], k)
            self.assertEqual(reps[5], {"phase/name": "done", "k": k})
            # the final metrics are result.json's, not the last report's
            self.assertEqual(metrics_of(h), {"val_loss": 1.0 / (5 + k), "epochs": 5, "k": k,
                                             "source": "result.json"}, h)
            self.assertAlmostEqual(fnum(h.get("value")), 1.0 / (5 + k), 12, h)
            with open(os.path.join(h["trial_dir"], "result.json")) as f:
                self.assertEqual(json.load(f)["source"], "result.json")
        best = int(job.get("best_trial"))
        self.assertEqual(params_of(trials[best])["k"], 2, "k=2 has the lower val_loss: %s" % job)

    def test_c_trial_reports(self):
        c = self.start_default(workers=(("w1", 2),))
        langs = compile_trial(c.specdir)
        j = c.submit(c.write_file("c.yaml", C_SPEC % ", ".join(langs)))
        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), str(len(langs)), job)
        for t, h in c.trials(j).items():
            lang = params_of(h)["lang"]
            self.assertEqual(h.get("state"), "succeeded", "trial %d (%s): %s" % (t, lang, h))
            reps = self.reports(j, t)
            self.assertEqual(len(reps), 4 + 3, "%s: 4 epochs, a note, a one-metric line, the "
                             "result; the oversized lines not at all: %s" % (lang, reps))
            for e, r in enumerate(reps[:4], 1):
                self.assertEqual(r, {"epoch": e, "val_loss": 0.5 ** e, "lang": lang})
            self.assertEqual(reps[4], {"note": "almost done", "epochs": 4})
            self.assertEqual(reps[5], {"epoch": 4})
            want = {"val_loss": 0.0625, "epochs": 4, "lang": lang, "quote": 'a "b"\tc\\',
                    "nan": None, "oversize_rejected": True}
            self.assertEqual(reps[6], want)
            self.assertEqual(metrics_of(h), want, "the last line is the result: %s" % h)
            self.assertAlmostEqual(fnum(h.get("value")), 0.0625, 12)
            with open(os.path.join(h["trial_dir"], "stderr.log")) as f:
                err = f.read()
            self.assertNotIn("ignoring report line", err, "the worker took every line")

    def test_outside_cgq(self):
        work = os.path.join(self.tmp, "by-hand")
        os.makedirs(work)
        shutil.copy(os.path.join(CLIENTS, "python", "cgq", "trial.py"), os.path.join(work, "cgq.py"))
        script = os.path.join(work, "py_trial.py")
        with open(script, "w") as f:
            f.write(PY_TRIAL)

        # no CGQ_* at all: params from NAME=VALUE, everything on stderr, no file
        r = subprocess.run([sys.executable, script, "k=3", "epochs=2", "--flag", "x=[1,2]"],
                           cwd=work, env=clean_env(), capture_output=True, text=True,
                           timeout=30 * SPEED)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "trial k=3 done\n")
        lines = json_lines(r.stderr)
        self.assertEqual([x.get("epoch") for x in lines], [1, 2, None, None], r.stderr)
        self.assertEqual(lines[-1], {"val_loss": 0.2, "epochs": 2, "k": 3,
                                     "source": "result.json"})
        self.assertFalse(os.path.exists(os.path.join(work, "result.json")),
                         "result() writes no file outside cgq")

        # CGQ_PARAMS set by hand wins; a CGQ_REPORT_FD naming a closed fd falls back to stderr
        r = subprocess.run([sys.executable, script, "k=9"], cwd=work, capture_output=True,
                           text=True, timeout=30 * SPEED,
                           env=clean_env(CGQ_PARAMS='{"k": 1, "epochs": 1}', CGQ_REPORT_FD="87"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("CGQ_REPORT_FD='87' is not an open descriptor", r.stderr)
        self.assertEqual(r.stderr.count("not an open descriptor"), 1, "warned once: " + r.stderr)
        self.assertEqual([x.get("k") for x in json_lines(r.stderr)], [1, 1, 1], r.stderr)

        # the old name keeps its behaviour: reports on stdout
        r = subprocess.run([sys.executable,
                            os.path.join(REPO, "orchestration", "examples", "quickstart", "train.py"),
                            "--epochs", "2", "--epoch-time", "0"],
                           cwd=work, env=clean_env(), capture_output=True, text=True,
                           timeout=30 * SPEED)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([x["epoch"] for x in json_lines(r.stdout)], [1, 2], r.stdout)

        # the C helper: stderr by hand, the named fd when it is open
        try:
            langs = compile_trial(work)
        except unittest.SkipTest:
            return
        for lang in langs:
            exe = os.path.join(work, "trial_" + lang)
            r = subprocess.run([exe, lang], cwd=work, env=clean_env(CGQ_PARAM_EPOCHS="2"),
                               capture_output=True, text=True, timeout=30 * SPEED)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout, "")
            got = json_lines(r.stderr)
            self.assertEqual(len(got), 2 + 3, r.stderr)
            self.assertEqual(got[-1]["val_loss"], 0.25)
            rfd, wfd = os.pipe()
            try:
                # pass_fds keeps the number: the child finds the pipe at fd wfd
                r = subprocess.run([exe, lang], cwd=work, pass_fds=(wfd,), capture_output=True,
                                   text=True, timeout=30 * SPEED,
                                   env=clean_env(CGQ_PARAM_EPOCHS="1", CGQ_REPORT_FD=str(wfd)))
                os.close(wfd)
                wfd = None
                with os.fdopen(rfd, "r") as f:
                    rfd = None
                    piped = json_lines(f.read())
            finally:
                for fd in (rfd, wfd):
                    if fd is not None:
                        os.close(fd)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, "", "nothing on stderr when the fd is open")
            self.assertEqual([x.get("epoch") for x in piped], [1, None, 1, None], piped)


class ExamplesTest(CgqTestCase):
    """`cgq run` of the two example specs, as a user would run them."""

    def cgq_run(self, work, example):
        env = clean_env()
        argv = [binary("cgq"), "run", os.path.join("orchestration", "examples", example,
                                                    "tune.yaml"), "--format", "json"]
        t0 = time.monotonic()
        p = subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=120 * SPEED)
        elapsed = time.monotonic() - t0
        out = p.stdout.decode("utf-8", "replace")
        err = p.stderr.decode("utf-8", "replace")
        with open(os.path.join(self.cluster.logdir, "cgq-run-%s.log" % example), "w") as f:
            f.write("[exit %d, %.1fs]\n--- stdout\n%s\n--- stderr\n%s\n" % (
                p.returncode, elapsed, out, err))
        for mark in SANITIZER_MARKS:
            self.assertNotIn(mark, err)
        self.assertEqual(p.returncode, 0, "cgq run %s; stderr tail:\n%s" % (example, err[-3000:]))
        try:
            doc = json.loads(out)
        except ValueError as e:
            self.fail("cgq run --format json printed no JSON (%s): %r" % (e, out[:1000]))
        self.assertEqual(doc.get("state"), "finished", out[:1000])
        for t in doc["trials"]:
            self.assertEqual(t["state"], "succeeded", "trial %s: %s" % (t["id"], t))
        if SUBREAPER:
            deadline = time.monotonic() + 5
            left = my_children()
            while left and time.monotonic() < deadline:
                time.sleep(0.1)
                left = my_children()
            self.assertEqual(left, [], "left running: %s" % [proc_cmdline(x)[:150] for x in left])
        return doc, elapsed

    def test_examples(self):
        work = os.path.join(self.tmp, "work")
        for ex in ("predictor-tuning", "eval-grid"):
            shutil.copytree(os.path.join(REPO, "orchestration", "examples", ex),
                            os.path.join(work, "orchestration", "examples", ex),
                            ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(os.path.join(CLIENTS, "python"), os.path.join(work, "clients", "python"),
                        ignore=shutil.ignore_patterns("__pycache__"))

        doc, elapsed = self.cgq_run(work, "predictor-tuning")
        trials = doc["trials"]
        self.assertEqual(len(trials), 24, "4 samples x 3 families x 2 seeds")
        self.assertEqual(doc["objective"], {"metric": "val_srcc", "mode": "max"})
        cells = sorted((t["params"]["test_family"], t["params"]["seed"]) for t in trials)
        self.assertEqual(cells, sorted([(f, s) for f in ("nb201", "squeezenet", "resnet")
                                        for s in (0, 1)] * 4), "each family x seed 4 times")
        for t in trials:
            m = t["metrics"]
            for key in ("val_srcc", "test_srcc", "test_mape", "best_epoch"):
                self.assertIn(key, m, "trial %s: %s" % (t["id"], m))
            self.assertEqual(m["test_family"], t["params"]["test_family"])
        self.assertGreater(trials[0]["metrics"]["val_srcc"], 0.9, "the best predictor ranks well")
        sys.stderr.write("cgq run predictor-tuning: %.1fs\n" % elapsed)

        doc, elapsed = self.cgq_run(work, "eval-grid")
        trials = doc["trials"]
        self.assertEqual(len(trials), 18, "2 models x 3 substitutions x 3 dtypes")
        combos = sorted((t["params"]["model"], t["params"]["subst"], t["params"]["dtype"])
                        for t in trials)
        self.assertEqual(len(set(combos)), 18, "every combination once")
        for t in trials:
            m, p = t["metrics"], t["params"]
            self.assertEqual((m["model"], m["subst"], m["dtype"]), (p["model"], p["subst"], p["dtype"]))
            if p["subst"] == "none":
                self.assertEqual(m["max_abs_diff"], 0.0, "the same graph twice: %s" % t)
            elif p["dtype"] == "float16":
                self.assertGreater(m["max_rel_diff"], 1e-5, "float16 shows a difference: %s" % t)
            elif p["dtype"] == "float64":
                self.assertLess(m["max_rel_diff"], 1e-9, "float64 barely differs: %s" % t)
        self.assertEqual(trials[0]["params"]["dtype"], "float16", "largest difference first")
        sys.stderr.write("cgq run eval-grid: %.1fs\n" % elapsed)


def main():
    prog = unittest.main(verbosity=2, exit=False)
    r = prog.result
    if not r.wasSuccessful():
        sys.exit(1)
    if NO_CC:
        print("SKIP (exit 77): %s; the rest passed" % NO_CC[0], flush=True)
        sys.exit(77)
    if r.testsRun and len(r.skipped) == r.testsRun:
        sys.exit(77)
    sys.exit(0)


if __name__ == "__main__":
    main()
