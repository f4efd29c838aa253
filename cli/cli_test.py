#!/usr/bin/env python3
"""cli_test: the cgq command line against real processes (Python 3 stdlib only).

  ShowTest   status, results (table, csv, json), workers and logs read a private
             redis-server filled with hand-written hashes (docs/architecture.md,
             "Redis data model"), so every field and format is checked exactly.
  ErrorTest  help, arguments, validate, and the bounded failures: no Redis, no
             coordinator (exit 1 within seconds), bad input (exit 2).
  RunTest    `cgq run` end to end: JSON output, a failing job, an unschedulable
             trial, Ctrl-C, --keep; nothing is left running afterwards.

Binaries come from $CGQ_BIN_DIR (set by ctest), else ../build/bin. Each class
has its own temporary directory, kept when a test fails. Exit 77 (skip) when
cgq or redis-server is missing.
"""

import csv
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.path.abspath(os.environ.get("CGQ_BIN_DIR") or os.path.join(HERE, "..", "build", "bin"))
CGQ = os.path.join(BIN, "cgq")
SANITIZER = ("AddressSanitizer", "LeakSanitizer", "runtime error")

# The integration tests' harness: free ports, a subreaper, process listing and
# a private redis-server with a RESP client.
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from harness import SUBREAPER, Cluster, free_port, my_children  # noqa: E402


def cgq(*args, env=None, cwd=None, timeout=60):
    """Runs the CLI; returns (rc, stdout, stderr, seconds). Fails on sanitizer output."""
    e = dict(os.environ)
    for k in ("CGQ_REDIS", "CGQ_COORDINATOR"):
        e.pop(k, None)
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([CGQ] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                       capture_output=True, env=e, cwd=cwd, timeout=timeout)
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    for mark in SANITIZER:
        if mark in err:
            raise AssertionError("cgq %s: sanitizer report:\n%s" % (" ".join(map(str, args)), err))
    return p.returncode, out, err, time.monotonic() - t0


class RedisServer:
    """A private redis-server on a free loopback port (the integration
    harness's), stopped by PID."""

    def __init__(self, tmp):
        self.cluster = Cluster(tmp)
        self.cluster.start_redis()
        self.port, self.url = self.cluster.redis_port, self.cluster.redis_url

    def cli(self, *args):
        return self.cluster.redis.cmd(*args)

    def hset(self, key, fields):
        args = []
        for k, v in fields.items():
            args += [k, v if isinstance(v, str) else json.dumps(v)]
        self.cli("HSET", key, *args)

    def stop(self):
        self.cluster.redis_proc.stop(10)
        self.cluster.redis.close()


class TmpCase(unittest.TestCase):
    tmp = None
    failed = False

    @classmethod
    def make_tmp(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cgq-cli-")

    @classmethod
    def drop_tmp(cls):
        if cls.failed:
            print("kept %s" % cls.tmp, file=sys.stderr)
        else:
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def run(self, result=None):
        r = super().run(result)
        if result is not None and (result.failures or result.errors):
            type(self).failed = True
        return r


# ---------------------------------------------------------------- status, results, workers, logs


class ShowTest(TmpCase):
    @classmethod
    def setUpClass(cls):
        cls.make_tmp()
        cls.redis = RedisServer(cls.tmp)
        cls.env = {"CGQ_REDIS": cls.redis.url}
        now = time.time()
        cls.now = now
        r = cls.redis
        # job 1: finished, maximise val; trial 1 failed; trial 2 the best, with its files here
        cls.trial_dir = os.path.join(cls.tmp, "work", "job-1", "trial-2", "attempt-1")
        os.makedirs(cls.trial_dir)
        with open(os.path.join(cls.trial_dir, "stdout.log"), "w") as f:
            f.write("hello out\n")
        with open(os.path.join(cls.trial_dir, "stderr.log"), "w") as f:
            f.write("hello err\n")
        r.hset("cgq:job:{1}", {
            "id": "1", "name": "demo", "state": "finished", "spec_path": "/x/tune.yaml",
            "created": repr(now - 100), "finished": repr(now - 40), "total": "3",
            "suggested": "3", "objective_metric": "val", "objective_mode": "max",
            "pending": "0", "running": "0", "succeeded": "2", "failed": "1", "stopped": "0",
            "cancelled": "0", "unschedulable": "0", "best_trial": "2", "best_value": "0.9",
            "searcher": "random"})
        r.hset("cgq:job:{1}:trial:0", {
            "id": "0", "job": "1", "state": "succeeded", "params": {"lr": 0.1, "arch": "a,b"},
            "metrics": {"val": 0.5, "loss": 1}, "value": "0.5", "attempt": "1", "node": "n1",
            "started": "1700000000.25", "finished": "1700000002.75", "duration": "2.5"})
        r.hset("cgq:job:{1}:trial:1", {
            "id": "1", "job": "1", "state": "failed", "params": {"lr": 0.2, "arch": 'say "hi"'},
            "attempt": "2", "node": "n2", "error": "exit status 1\nValueError: boom",
            "log": "line1\nline2", "started": "1700000003", "finished": "1700000004",
            "trial_dir": "/nonexistent/job-1/trial-1/attempt-2"})
        r.hset("cgq:job:{1}:trial:2", {
            "id": "2", "job": "1", "state": "succeeded", "params": {"lr": 0.3, "arch": "c"},
            "metrics": {"val": 0.9, "loss": 0.5}, "value": "0.9", "attempt": "1", "node": "n1",
            "started": "1700000005", "finished": "1700000006", "duration": "1",
            "trial_dir": cls.trial_dir, "log": "tail only"})
        r.cli("ZADD", "cgq:job:{1}:leaderboard", "0.5", "0", "0.9", "2")
        # job 2: running, unbounded, minimise loss, blocked
        r.hset("cgq:job:{2}", {
            "id": "2", "name": "min-job", "state": "running", "created": repr(now - 10),
            "total": "", "suggested": "1", "objective_metric": "loss", "objective_mode": "min",
            "unschedulable": "1", "blocked": "needs gpu 1 but the 1 connected node(s) have 0"})
        r.hset("cgq:job:{2}:trial:0", {
            "id": "0", "job": "2", "state": "unschedulable", "params": {"x": 1}, "attempt": "0",
            "error": "needs gpu 1 but the 1 connected node(s) have 0"})
        r.cli("SADD", "cgq:job:{2}:active", "0")
        # job 3: a families x datasets x seeds evaluation (seed 004); metrics named
        # like built-in columns (id, state), with units (_s, _ms, _bytes)
        cls.paper = []
        tid = 0
        for fam in ("gcn", "mlp"):
            for ds in ("x", "y"):
                for seed in (0, 1, 2):
                    acc = round(0.5 + 0.1 * (fam == "gcn") + 0.03 * (ds == "y") + 0.011 * seed * seed, 6)
                    metrics = {"acc": acc, "id": 100 + tid, "state": "ok", "train_s": 12.5 + seed,
                               "lat_ms": 0.25 * (seed + 1), "peak_bytes": 1536 * 1024}
                    if tid == 4:
                        del metrics["lat_ms"]  # a metric missing from one trial
                    r.hset("cgq:job:{31}:trial:%d" % tid, {
                        "id": str(tid), "job": "31", "state": "succeeded", "attempt": "1",
                        "params": {"family": fam, "dataset": ds, "seed": seed, "lr": 0.01 * (seed + 1)},
                        "metrics": metrics, "value": repr(acc), "duration": "1"})
                    tid += 1
        r.hset("cgq:job:{31}:trial:%d" % tid, {
            "id": str(tid), "job": "31", "state": "failed", "attempt": "1", "error": "boom",
            "params": {"family": "gcn", "dataset": "x", "seed": 9, "lr": 1}})
        r.hset("cgq:job:{31}", {
            "id": "31", "name": "paper", "state": "finished", "created": repr(now - 5),
            "total": str(tid + 1), "suggested": str(tid + 1), "objective_metric": "acc",
            "objective_mode": "max", "succeeded": str(tid), "failed": "1"})
        r.cli("ZADD", "cgq:jobs", repr(now - 100), "1", repr(now - 10), "2")
        # nodes: alive, silent for a minute, gone
        r.hset("cgq:node:n1", {"id": "n1", "kind": "worker", "state": "alive", "hostname": "h1",
                               "cpus": "4", "free_cpus": "2.5", "gpus": "2", "free_gpus": "1",
                               "running": "1", "last_seen": repr(now)})
        r.hset("cgq:node:n2", {"id": "n2", "kind": "worker", "state": "alive", "hostname": "h2",
                               "cpus": "8", "free_cpus": "8", "gpus": "0", "free_gpus": "0",
                               "running": "0", "last_seen": repr(now - 60)})
        r.hset("cgq:node:n3", {"id": "n3", "kind": "worker", "state": "gone", "hostname": "h3",
                               "cpus": "1", "free_cpus": "1", "gpus": "0", "free_gpus": "0",
                               "running": "0", "last_seen": repr(now - 600)})
        r.cli("SADD", "cgq:nodes", "n1", "n2", "n3")

    @classmethod
    def tearDownClass(cls):
        cls.redis.stop()
        cls.drop_tmp()

    def ok(self, *args):
        rc, out, err, _ = cgq(*args, env=self.env)
        self.assertEqual(rc, 0, "cgq %s: %s" % (" ".join(map(str, args)), err))
        return out

    def test_status_list(self):
        out = self.ok("status")
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["id", "name", "state", "done/total", "running", "failed",
                                            "best", "age"])
        self.assertTrue(lines[1].split()[0] == "2" and lines[2].split()[0] == "1",
                        "newest first:\n" + out)
        self.assertIn("running (blocked)", lines[1])
        self.assertIn("0/?", lines[1])
        self.assertIn("3/3", lines[2])
        self.assertIn("val=0.9 (trial 2)", lines[2])
        out = self.ok("status", "--limit", "1")
        self.assertEqual(len([l for l in out.splitlines() if l.split()[0:1] == ["1"]]), 0, out)
        self.assertIn("1 older jobs not shown", out)

    def test_status_job(self):
        out = self.ok("status", "1")
        self.assertIn("job 1  demo  finished", out)
        self.assertIn("objective   val (max)", out)
        self.assertIn("3/3 done", out)
        self.assertIn("succeeded 2, failed 1", out)
        top = out[out.index("top 2:"):].splitlines()
        self.assertEqual(top[1].split()[:4], ["rank", "trial", "val", "lr"])
        self.assertEqual(top[2].split()[:3], ["1", "2", "0.9"])
        self.assertEqual(top[3].split()[:3], ["2", "0", "0.5"])
        out = self.ok("status", "2")
        self.assertIn("unschedulable: needs gpu 1", out)
        self.assertIn("unschedulable 1", out)
        rc, out, err, _ = cgq("status", "9", env=self.env)
        self.assertEqual(rc, 2, err)
        self.assertTrue(err.startswith("cgq: no job 9"), err)
        self.assertEqual(len(err.splitlines()), 1, err)

    def test_cancelled_and_stopped_are_said(self):
        # Issue 23: a cancelled job read "10/10 done", as if all ran.
        self.redis.hset("cgq:job:{4}", {
            "id": "4", "name": "cut-short", "state": "cancelled", "created": repr(self.now - 50),
            "finished": repr(self.now - 45), "total": "10", "suggested": "4",
            "objective_metric": "val", "objective_mode": "max", "succeeded": "2", "failed": "1",
            "stopped": "1", "cancelled": "6", "best_trial": "0", "best_value": "0.5"})
        out = self.ok("status", "4")
        self.assertIn("trials      10/10 (6 cancelled) done", out)
        rc, out, err, _ = cgq("watch", "4", env=self.env, timeout=30)
        self.assertEqual(rc, 1, err)  # a cancelled job
        self.assertRegex(out.splitlines()[0],
                         r"10/10  running 0  failed 1  stopped 1  cancelled 6  best val=0\.5")

    def test_results_json(self):
        out = self.ok("results", "1", "--format", "json")
        doc = json.loads(out, object_pairs_hook=lambda kv: kv)
        self.assertEqual([k for k, _ in doc], ["job", "name", "state", "objective", "trials"])
        doc = json.loads(out)
        self.assertEqual(doc["job"], 1)
        self.assertEqual(doc["name"], "demo")
        self.assertEqual(doc["state"], "finished")
        self.assertEqual(doc["objective"], {"metric": "val", "mode": "max"})
        self.assertEqual([t["id"] for t in doc["trials"]], [2, 0, 1], "best first, then by id")
        keys = ["id", "state", "params", "metrics", "attempts", "node", "started", "finished",
                "error", "warning"]
        for t in json.loads(out, object_pairs_hook=lambda kv: kv)[4][1]:
            self.assertEqual([k for k, _ in t], keys)
        t2, t0, t1 = doc["trials"]
        self.assertEqual(t0["params"], {"lr": 0.1, "arch": "a,b"})
        self.assertEqual(t0["metrics"], {"val": 0.5, "loss": 1})
        self.assertIsInstance(t0["metrics"]["loss"], int)
        self.assertEqual(t0["attempts"], 1)
        self.assertEqual(t0["node"], "n1")
        self.assertEqual(t0["started"], 1700000000.25)
        self.assertEqual(t0["finished"], 1700000002.75)
        self.assertIsNone(t0["error"])
        self.assertIsNone(t1["metrics"])
        self.assertEqual(t1["error"], "exit status 1\nValueError: boom")
        self.assertEqual(t1["params"]["arch"], 'say "hi"')
        self.assertIn('"lr": 0.1,', out, "reals as their shortest text")
        out = self.ok("results", "2", "--format", "json")
        doc = json.loads(out)
        self.assertEqual(doc["objective"], {"metric": "loss", "mode": "min"})
        self.assertEqual(doc["trials"][0]["state"], "unschedulable")
        self.assertIsNone(doc["trials"][0]["node"])
        self.assertIsNone(doc["trials"][0]["started"])

    def test_results_json_odd_strings(self):
        # job 3 (not in cgq:jobs, so the listing tests do not see it): params
        # with quotes, newlines, control characters and non-ASCII text, and
        # an error and a node id that are not valid UTF-8 (a trial's stderr
        # can hold anything, --id is any bytes).
        self.redis.hset("cgq:job:{3}", {
            "id": "3", "name": "odd \"names\"\n", "state": "finished", "suggested": "1",
            "total": "1", "objective_metric": "v", "objective_mode": "max", "failed": "1"})
        params = {"s": "a\"b\\c\nd\te\u00e9\u2028\U0001F600", "k\"ey\n": 1, "\u03bb": [0.1, "x"]}
        self.redis.hset("cgq:job:{3}:trial:0", {
            "id": "0", "job": "3", "state": "failed", "attempt": "1", "params": params})
        self.redis.cli("HSET", "cgq:job:{3}:trial:0",
                       "error", b"exit status 1\n\xed\xa0\x80 caf\xc3\xa9 \xffend",
                       "node", b"n\xc0\xafx")
        rc, out, err, _ = cgq("results", "3", "--format", "json", env=self.env)
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["name"], "odd \"names\"\n")
        t = doc["trials"][0]
        self.assertEqual(t["params"], params)
        self.assertIsNotNone(t["error"], "an error that is not UTF-8 is still shown:\n" + out)
        self.assertTrue(t["error"].startswith("exit status 1\n"), t["error"])
        self.assertIn(" caf\u00e9 ", t["error"])
        self.assertTrue(t["error"].endswith("end"), t["error"])
        self.assertIn("\ufffd", t["error"], "bad bytes become U+FFFD")
        self.assertIsNotNone(t["node"])
        self.assertTrue(t["node"].startswith("n") and t["node"].endswith("x"), t["node"])
        rc, out, err, _ = cgq("results", "3", "--format", "csv", env=self.env)
        self.assertEqual(rc, 0, err)
        rows = list(csv.reader(io.StringIO(out)))
        self.assertEqual(len(rows), 2, out)
        self.assertEqual(rows[1][rows[0].index("s")], params["s"])

    def test_results_csv(self):
        out = self.ok("results", "1", "--format", "csv")
        rows = list(csv.reader(io.StringIO(out)))
        self.assertEqual(rows[0], ["id", "state", "value", "lr", "arch", "val", "loss",
                                   "attempts", "node", "duration", "error"])
        self.assertEqual([r[0] for r in rows[1:]], ["2", "0", "1"])
        self.assertEqual(rows[2], ["0", "succeeded", "0.5", "0.1", "a,b", "0.5", "1", "1", "n1",
                                   "2.500", ""])
        self.assertEqual(rows[3][4], 'say "hi"')
        self.assertEqual(rows[3][2], "")
        self.assertEqual(rows[3][9], "1.000", "duration from started/finished")
        self.assertEqual(rows[3][10], "exit status 1\nValueError: boom")

    def test_results_table_and_top(self):
        out = self.ok("results", "1")
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["trial", "state", "val", "lr", "arch", "loss",
                                            "attempts", "node", "duration", "error"])
        self.assertEqual([l.split()[0] for l in lines[1:]], ["2", "0", "1"])
        self.assertIn("exit status 1 ValueError: boom", lines[3], "one line per trial")
        out = self.ok("results", "1", "--top", "1")
        self.assertEqual([l.split()[0] for l in out.splitlines()[1:]], ["2"])
        out = self.ok("results", "1", "--top", "2", "--format", "json")
        self.assertEqual([t["id"] for t in json.loads(out)["trials"]], [2, 0])
        for bad in (["--format", "xml"], ["--top", "0"], ["--top", "x"]):
            rc, _, err, _ = cgq("results", "1", *bad, env=self.env)
            self.assertEqual(rc, 2, err)

    def test_watch_plot_unknown_job(self):
        for args in (["watch", "77"], ["plot", "77", "--out", os.path.join(self.tmp, "x.svg")]):
            rc, out, err, _ = cgq(*args, env=self.env)
            self.assertEqual(rc, 2, err)
            self.assertIn("no job 77", err)
        # a finished job: watch prints the summary and exits at once, even on a pipe
        rc, out, err, took = cgq("watch", "1", env=self.env)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"^\[#{20}\]  3/3  running 0  failed 1  best val=0\.9 \(trial 2\)  1:00\n")
        self.assertIn("job 1 finished: 2 succeeded, 1 failed", err)
        self.assertLess(took, 5)
        svg = os.path.join(self.tmp, "job1.svg")
        rc, out, err, _ = cgq("plot", "1", "--out", svg, env=self.env)
        self.assertEqual(rc, 0, err)
        self.assertIn("over 2 finished trials (no trial reported progress)", out)
        import xml.etree.ElementTree as ET
        root = ET.parse(svg).getroot()
        self.assertEqual(len(root.findall("{http://www.w3.org/2000/svg}svg")), 1, "one plot")

    def watch_screen(self, job, want):
        """Runs cgq watch JOB in a pseudo-terminal until it drew a whole
        frame showing want, then quits with q; returns the screen text."""
        import fcntl, select, struct, termios
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        env = dict(os.environ, CGQ_REDIS=self.redis.url)
        p = subprocess.Popen([CGQ, "watch", str(job), "--interval", "200"], stdin=slave,
                             stdout=slave, stderr=slave, env=env)
        out = b""
        try:
            deadline = time.monotonic() + 20
            # the whole frame: want, then the erase-below that ends a frame
            while time.monotonic() < deadline and not (
                    want.encode() in out and b"\x1b[J" in out[out.find(want.encode()):]):
                r, _, _ = select.select([master], [], [], 0.1)
                if r:
                    out += os.read(master, 65536)
            os.write(master, b"q")
            self.assertEqual(p.wait(10), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            os.close(master)
            os.close(slave)
        text = out.decode("utf-8", "replace")
        self.assertIn(want, text)
        for mark in SANITIZER:
            self.assertNotIn(mark, text)
        return text

    def test_watch_blocked_and_front(self):
        text = self.watch_screen(2, "waiting: needs gpu 1 but the 1 connected node(s) have 0 "
                                 "(cgq cancel 2 cancels the job)")
        self.assertIn("top: no trial has succeeded yet", text)
        self.assertIn("unschedulable 1", text)
        # several objectives: the size of the front, no ranking
        self.redis.hset("cgq:job:{32}", {"id": "32", "name": "mo", "state": "running",
                                         "total": "4", "suggested": "2", "succeeded": "2",
                                         "pending": "2"})
        self.redis.cli("HSET", "cgq:job:{32}:pareto", "0", "[1, 2]", "1", "[2, 1]")
        text = self.watch_screen(32, "pareto front: 2 trials (cgq pareto 32)")
        self.assertNotRegex(text, r"\ntop[ :]", "no ranking")

    def test_results_columns_and_units(self):
        out = self.ok("results", "31", "--format", "csv")
        head = next(csv.reader(io.StringIO(out)))
        self.assertEqual(len(head), len(set(head)), "no column twice: %s" % head)
        self.assertEqual(head[:3], ["id", "state", "value"])
        self.assertIn("metrics.id", head)
        self.assertIn("metrics.state", head)
        out = self.ok("results", "31")
        head = out.splitlines()[0].split()
        self.assertEqual(len(head), len(set(head)), "no column twice: %s" % head)
        self.assertEqual(head, ["trial", "state", "acc", "family", "dataset", "seed", "lr",
                                "id", "metrics.state", "train_s", "lat_ms", "peak_bytes",
                                "attempts", "node", "duration", "error"])
        row = [l for l in out.splitlines() if l.split()[0] == "2"][0].split()
        self.assertEqual(row[8:13], ["ok", "14.5s", "0.75ms", "1.5", "MiB"], row)

    def paper_groups(self, by, params_not_grouped):
        """The expected groups, computed here from `cgq results --format json`."""
        import statistics
        doc = json.loads(self.ok("results", "31", "--format", "json"))
        groups = {}
        for t in doc["trials"]:
            if t["state"] != "succeeded":
                continue
            key = tuple(t["params"][k] for k in by)
            g = groups.setdefault(key, {})
            for src in (t["metrics"], {k: t["params"][k] for k in params_not_grouped}):
                for k, v in src.items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        g.setdefault(k, []).append(v)
        out = {}
        for key, g in groups.items():
            out[key] = {k: {"n": len(v), "mean": statistics.mean(v),
                            "std": statistics.stdev(v) if len(v) > 1 else None,
                            "min": min(v), "max": max(v)} for k, v in g.items()}
        return out

    def test_results_group_by(self):
        want = self.paper_groups(("family", "dataset"), ("seed", "lr"))
        doc = json.loads(self.ok("results", "31", "--group-by", "family,dataset", "--format", "json"))
        self.assertEqual(doc["group_by"], ["family", "dataset"])
        self.assertEqual(doc["std"], "sample")
        keys = [(g["key"]["family"], g["key"]["dataset"]) for g in doc["groups"]]
        self.assertEqual(keys, sorted(want), "sorted groups, the failed trial left out")
        for g in doc["groups"]:
            key = (g["key"]["family"], g["key"]["dataset"])
            self.assertEqual(g["n"], 3)
            self.assertEqual(sorted(g["stats"]), sorted(want[key]), key)
            for m, st in g["stats"].items():
                for f in ("n", "mean", "std", "min", "max"):
                    if want[key][m][f] is None:
                        self.assertIsNone(st[f], (key, m, f))
                    else:
                        self.assertAlmostEqual(st[f], want[key][m][f], places=9, msg=(key, m, f))
        self.assertEqual(doc["groups"][0]["stats"]["lat_ms"]["n"], 3)
        self.assertEqual([g["stats"]["lat_ms"]["n"] for g in doc["groups"]], [3, 2, 3, 3],
                         "trial 4 (gcn, y) has no lat_ms")

        rows = list(csv.reader(io.StringIO(self.ok("results", "31", "--group-by", "family,dataset",
                                                   "--format", "csv"))))
        self.assertEqual(rows[0][:7], ["family", "dataset", "n", "acc_mean", "acc_std", "acc_min",
                                       "acc_max"])
        self.assertEqual(len(rows), 5)
        for row in rows[1:]:
            st = want[(row[0], row[1])]["acc"]
            self.assertEqual(row[2], "3")
            for i, f in enumerate(("mean", "std", "min", "max")):
                self.assertAlmostEqual(float(row[3 + i]), st[f], places=9)

        out = self.ok("results", "31", "--group-by", "family,dataset")
        lines = out.splitlines()
        self.assertEqual(lines[0].split()[:4], ["family", "dataset", "n", "acc"])
        self.assertEqual(len(lines), 6, out)
        self.assertRegex(lines[1], r"^gcn\s+x\s+3\s+\S+ ± \S+ \[\S+, \S+\]")
        self.assertIn("sample std", lines[-1])

        # grouped on one key: the other param becomes a stat column
        want1 = self.paper_groups(("family",), ("dataset", "seed", "lr"))
        doc = json.loads(self.ok("results", "31", "--group-by", "family", "--format", "json"))
        self.assertEqual([g["n"] for g in doc["groups"]], [6, 6])
        self.assertNotIn("dataset", doc["groups"][0]["stats"], "strings are not averaged")
        self.assertAlmostEqual(doc["groups"][1]["stats"]["acc"]["std"], want1[("mlp",)]["acc"]["std"])
        rc, _, err, _ = cgq("results", "31", "--group-by", "nosuch", env=self.env)
        self.assertEqual(rc, 2)
        self.assertIn("'nosuch'", err)

    def test_results_fit_and_columns(self):
        # Issue 23, item 4: a results table about 400 columns wide. --columns
        # picks; on a terminal the params and metrics that do not fit are
        # left out, and the table says so.
        out = self.ok("results", "31", "--columns", "lat_ms,seed")
        lines = out.splitlines()
        # params first, then metrics, each in the order listed
        self.assertEqual(lines[0].split(), ["trial", "state", "acc", "seed", "lat_ms", "attempts",
                                            "node", "duration", "error"])
        rc, _, err, _ = cgq("results", "31", "--columns", "seed,nope", env=self.env)
        self.assertEqual(rc, 2, err)
        self.assertIn("--columns: no param or metric 'nope' (the trials have: family, dataset, "
                      "seed, lr, ", err)
        import pty
        master, slave = pty.openpty()
        env = dict(os.environ, CGQ_REDIS=self.redis.url, COLUMNS="72")
        p = subprocess.Popen([CGQ, "results", "31"], stdout=slave, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                b = os.read(master, 65536)
            except OSError:
                break
            if not b:
                break
            chunks.append(b)
        p.wait(10)
        os.close(master)
        text = b"".join(chunks).decode().replace("\r\n", "\n")
        lines = text.splitlines()
        self.assertEqual(p.returncode, 0, p.stderr.read())
        self.assertRegex(lines[-1], r"^\(\d+ more columns left out to fit the terminal: "
                                    r"--columns NAMES picks them")
        for l in lines[:-1]:
            if "boom" not in l:  # the error column may run past the edge
                self.assertLessEqual(len(l.rstrip()), 72, l)
        self.assertEqual(lines[0].split()[:4], ["trial", "state", "acc", "family"])
        # a pipe gets every column
        self.assertNotIn("left out", self.ok("results", "31"))

    def test_results_paper_tables(self):
        # Issue 23, item 7: column selection, digits that follow the std, no
        # float noise on constants, Markdown and LaTeX.
        import math
        doc = json.loads(self.ok("results", "31", "--group-by", "family,dataset", "--format", "json"))

        def cell(st):  # the rule, written again here: the std to two significant digits
            if st["n"] < 2 or not st["std"]:
                m = st["mean"]
                return "%.0f" % m if m == int(m) else "%.6g" % m
            d = 1 - math.floor(math.log10(st["std"]))
            if d > 4:  # tiny spreads: scientific, the same last digit
                p = lambda v: max(0, math.floor(math.log10(abs(v))) + d)
                return "%.*e ± %.*e" % (p(st["mean"]), st["mean"], p(st["std"]), st["std"])
            if d >= 0:
                return "%.*f ± %.*f" % (d, st["mean"], d, st["std"])
            u = 10 ** -d
            return "%.0f ± %.0f" % (round(st["mean"] / u) * u, round(st["std"] / u) * u)

        out = self.ok("results", "31", "--group-by", "family,dataset", "--format", "markdown",
                      "--columns", "acc,lat_ms,peak_bytes")
        lines = out.splitlines()
        self.assertEqual(lines[0], "| family | dataset | n | acc | lat_ms | peak_bytes |")
        self.assertEqual(lines[1], "|---|---|---:|---:|---:|---:|")
        self.assertEqual(len(lines), 2 + len(doc["groups"]), out)
        for line, g in zip(lines[2:], doc["groups"]):
            st = g["stats"]
            want = "| %s | %s | %d | %s | %s | %s |" % (
                g["key"]["family"], g["key"]["dataset"], g["n"], cell(st["acc"]),
                cell(st["lat_ms"]), cell(st["peak_bytes"]))
            self.assertEqual(line, want)
        self.assertIn("| 1572864 |", lines[2], "a constant: no ± 5e-19")
        self.assertRegex(lines[2], r"\| 0\.\d{3} ± 0\.0\d{2} \|", "acc to the std's digits")

        out = self.ok("results", "31", "--group-by", "family", "--format", "latex",
                      "--columns", "acc")
        lines = out.splitlines()
        self.assertEqual(lines[:3], ["\\begin{tabular}{lrr}", "\\hline", "family & $n$ & acc \\\\"])
        self.assertRegex(lines[4], r"^gcn & 6 & \$0\.\d+ \\pm 0\.\d+\$ \\\\$")
        self.assertEqual(lines[-2:], ["\\hline", "\\end{tabular}"])

        # the terminal table: the same digits, then [min, max]; only the columns asked
        out = self.ok("results", "31", "--group-by", "family,dataset", "--columns", "lat_ms,acc")
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["family", "dataset", "n", "lat_ms", "acc"])
        acc = doc["groups"][0]["stats"]["acc"]
        self.assertIn(cell(acc) + " [", lines[1])

        rc, _, err, _ = cgq("results", "31", "--group-by", "family", "--columns", "acc,nope",
                            env=self.env)
        self.assertEqual(rc, 2, err)
        self.assertIn("--columns: no numeric metric or param 'nope' to summarise (columns: acc", err)
        rc, _, err, _ = cgq("results", "31", "--format", "latex", env=self.env)
        self.assertEqual(rc, 2, err)
        self.assertIn("--group-by", err)

    def test_workers(self):
        out = self.ok("workers")
        rows = {l.split()[0]: l for l in out.splitlines()[1:]}
        self.assertEqual(sorted(rows), ["n1", "n2", "n3"])
        self.assertEqual(rows["n1"].split()[1:5], ["alive", "2.5/4", "1/2", "1"])
        # last seen when the fixture was written: a few seconds ago on a loaded machine
        self.assertRegex(rows["n1"].split()[5], r"^[0-9]s$")
        self.assertEqual(rows["n2"].split()[1], "dead?", "silent for 60 s")
        self.assertEqual(rows["n3"].split()[1], "gone")

    def test_logs(self):
        out = self.ok("logs", "1", "1")
        self.assertIn("job 1 trial 1: failed, attempt 2 on n2", out)
        self.assertIn("error: exit status 1", out)
        self.assertIn("line1\nline2", out, "the worker's log tail when the dir is elsewhere")
        out = self.ok("logs", "1", "2")
        self.assertIn("hello out", out)
        self.assertIn("hello err", out)
        self.assertNotIn("tail only", out, "the complete files win over the tail")
        for args, code in ((("1", "7"), 2), (("5", "0"), 2), (("1", "x"), 2)):
            rc, _, err, _ = cgq("logs", *args, env=self.env)
            self.assertEqual(rc, code, err)
            self.assertEqual(len(err.splitlines()), 1, err)


# ---------------------------------------------------------------- errors


GOOD = """name: ok
space:
  x: {uniform: [0, 1]}
  y: {grid: [1, 2]}
search: {algorithm: random, samples: 3, seed: 1}
objective: {metric: score, mode: max}
trial: {kind: noop}
"""

BAD = """name: bad
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, samplez: 3}
trial: {kind: noop}
"""


class ErrorTest(TmpCase):
    @classmethod
    def setUpClass(cls):
        cls.make_tmp()
        cls.good = os.path.join(cls.tmp, "good.yaml")
        cls.bad = os.path.join(cls.tmp, "bad.yaml")
        with open(cls.good, "w") as f:
            f.write(GOOD)
        with open(cls.bad, "w") as f:
            f.write(BAD)

    @classmethod
    def tearDownClass(cls):
        cls.drop_tmp()

    def test_help_and_version(self):
        rc, out, _, _ = cgq("--version")
        self.assertEqual((rc, out), (0, "cgq 0.1.0\n"))
        for args in (["--help"], ["help"], ["-h"]):
            rc, out, _, _ = cgq(*args)
            self.assertEqual(rc, 0)
            self.assertIn("usage: cgq", out)
        for c in ("run", "submit", "validate", "status", "results", "logs", "cancel", "update",
                  "workers", "devices", "watch", "plot", "pareto", "keygen"):
            for args in ([c, "--help"], ["help", c]):
                rc, out, err, _ = cgq(*args)
                self.assertEqual(rc, 0, err)
                self.assertTrue(out.startswith("usage: cgq " + c), out)
                self.assertIn("--redis URL", out)
            for v in ("--version", "-V"):
                rc, out, err, _ = cgq(c, v)
                self.assertEqual((rc, out), (0, "cgq 0.1.0\n"), "cgq %s %s: %s" % (c, v, err))
        for args in (["help", "--help"], ["help", "-h"]):
            rc, out, err, _ = cgq(*args)
            self.assertEqual(rc, 0, err)
            self.assertTrue(out.startswith("usage: cgq help [COMMAND]"), out)
        # every program has --version; the daemons' ranges are whole numbers
        for prog in ("cgq-coordinator", "cgq-worker", "cgq-device-runner"):
            path = os.path.join(BIN, prog)
            if not os.access(path, os.X_OK):
                continue
            p = subprocess.run([path, "--version"], capture_output=True, timeout=10)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertRegex(p.stdout.decode(), r"^%s \d" % prog)
            p = subprocess.run([path, "--help"], capture_output=True, timeout=10)
            self.assertNotRegex(p.stdout.decode(), r"\d\.\d+e\+\d", "no 1.07374e+09 in --help")
        p = subprocess.run([os.path.join(BIN, "cgq-coordinator"), "--help"], capture_output=True,
                           timeout=10)
        self.assertIn("(1K to 1G)", p.stdout.decode())
        # no printf escape shows through in any program's --help (issue 23:
        # cgq-predictor printed "+-10 %%")
        for prog in ("cgq-coordinator", "cgq-worker", "cgq-device-runner", "cgq-cg",
                     "cgq-predictor"):
            path = os.path.join(BIN, prog)
            if not os.access(path, os.X_OK):
                continue
            p = subprocess.run([path, "--help"], capture_output=True, timeout=10)
            self.assertEqual(p.returncode, 0, "%s --help: %s" % (prog, p.stderr))
            text = p.stdout.decode()
            self.assertIn("usage", text.lower(), prog)
            self.assertNotRegex(text, r"%%|%[-0-9.]*[sdgfzlu]\b", "%s --help: %s" % (prog, text))
        rc, _, err, _ = cgq()
        self.assertEqual(rc, 2)
        self.assertIn("usage: cgq", err)

    def test_bad_arguments(self):
        for args in (["frobnicate"], ["status", "--frob"], ["results"], ["results", "1", "2"],
                     ["results", "x"], ["cancel", "-1"], ["run", "--workers", "0", self.good],
                     ["run", "--format", "csv", self.good], ["run", "--cpus", "-1", self.good],
                     ["status", "--limit"], ["help", "nope"], ["--frob", "status"]):
            rc, out, err, _ = cgq(*args)
            self.assertEqual(rc, 2, "cgq %s: %s" % (" ".join(args), err))
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertTrue(err.startswith("cgq: "), err)

    def test_validate(self):
        rc, out, err, _ = cgq("validate", self.good)
        self.assertEqual(rc, 0, err)
        self.assertIn("ok", out)
        rc, out, err, _ = cgq("validate", self.bad)
        self.assertEqual(rc, 2)
        self.assertIn("bad.yaml:4:", err)
        self.assertIn("samplez", err)
        rc, _, err, _ = cgq("validate", os.path.join(self.tmp, "missing.yaml"))
        self.assertEqual(rc, 2)
        self.assertIn("missing.yaml", err)

    def spec_file(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_validate_limits(self):
        # the coordinator's limit, checked by validate as submit does
        big = self.spec_file("big.yaml", "name: big\nspace:\n  x: {uniform: [0, 1]}\n"
                             "search: {algorithm: random, samples: 1000000000000}\n"
                             "trial: {command: \"true\"}\n")
        rc, out, err, _ = cgq("validate", big)
        self.assertEqual(rc, 2, err)
        self.assertIn("the search has 1000000000000 trials, more than the limit of 10000000 "
                      "(lower search.samples or the grid, or raise cgq-coordinator --max-trials)",
                      err)
        self.assertIn("trials: 1000000000000", out, "still described")
        huge = self.spec_file("huge.yaml", "name: huge\nspace:\n  x: {uniform: [0, 1]}\n"
                              "search: {algorithm: random, samples: 100000000000000000000}\n"
                              "trial: {command: \"true\"}\n")
        rc, out, err, _ = cgq("validate", huge)
        self.assertEqual(rc, 2, err)
        self.assertIn("huge.yaml:4:38: search.samples must be at most 9223372036854775807, "
                      "not 100000000000000000000", err)
        self.assertNotIn("integer >= 1", err)
        ok = self.spec_file("ok10m.yaml", "name: ok\nspace:\n  x: {uniform: [0, 1]}\n"
                            "search: {algorithm: random, samples: 10000000}\n"
                            "trial: {command: \"true\"}\n")
        rc, out, err, _ = cgq("validate", ok)
        self.assertEqual(rc, 0, err)

    def test_validate_relative_script(self):
        for command, script in (("python3 train.py --lr {lr}", "train.py"),
                                ("sh ./run.sh", "./run.sh"),
                                ("[python3, scripts/t.py]", "scripts/t.py")):
            cmd = command if command.startswith("[") else '"%s"' % command
            path = self.spec_file("rel.yaml", "name: rel\nspace: {lr: 0.1}\ntrial:\n  command: %s\n"
                                  % cmd)
            rc, out, err, _ = cgq("validate", path)
            self.assertEqual(rc, 0, err)
            self.assertIn("rel.yaml: warning: trial.command names '%s' by a relative path" % script,
                          err)
            self.assertIn("write {spec_dir}/%s" % script.lstrip("./"), err)
        # {spec_dir}/train.py must exist beside the spec (test_missing_script)
        with open(os.path.join(os.path.dirname(self.spec_file("abs.yaml", "")), "train.py"),
                  "w") as f:
            f.write("print(1)\n")
        for command in ("python3 {spec_dir}/train.py", "python3 /opt/x/train.py", "echo hi",
                        "python3 -c 'print(1)'"):
            path = self.spec_file("abs.yaml", "name: abs\nspace: {lr: 0.1}\ntrial:\n  command: \"%s\"\n"
                                  % command.replace('"', '\\"'))
            rc, out, err, _ = cgq("validate", path)
            self.assertEqual(rc, 0, err)
            self.assertNotIn("warning", err, command)

    def test_no_redis(self):
        url = "redis://127.0.0.1:%d/0" % free_port()
        for args in (["status"], ["status", "1"], ["results", "1"], ["workers"],
                     ["logs", "1", "0"], ["devices"], ["watch", "1"],
                     ["plot", "1", "--out", os.path.join(self.tmp, "x.svg")],
                     ["results", "1", "--group-by", "family"]):
            rc, out, err, took = cgq(*args, env={"CGQ_REDIS": url})
            self.assertEqual(rc, 1, err)
            self.assertLess(took, 3)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn(url[len("redis://"):-2], err)
        rc, _, err, _ = cgq("status", "--redis", "nope://x")
        self.assertEqual(rc, 2, err)

    def test_no_coordinator(self):
        ep = "tcp://127.0.0.1:%d" % free_port()
        for args in (["cancel", "1"], ["submit", self.good]):
            rc, out, err, took = cgq(*args, "--coordinator", ep)
            self.assertEqual(rc, 1, err)
            self.assertLess(took, 3, "refused at once")
            self.assertEqual(err.strip(), "cgq: cannot reach the coordinator at %s: connection "
                             "refused (is cgq-coordinator running? check --coordinator / "
                             "CGQ_COORDINATOR)" % ep)
        # something that accepts connections but never answers: the 5 s bound
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            ep = "tcp://127.0.0.1:%d" % s.getsockname()[1]
            rc, out, err, took = cgq("cancel", "1", env={"CGQ_COORDINATOR": ep})
        self.assertEqual(rc, 1, err)
        self.assertTrue(4.5 < took < 8, took)
        self.assertIn("within 5s", err)
        # a bad spec is refused before anything is contacted
        rc, _, err, took = cgq("submit", self.bad, "--coordinator", ep)
        self.assertEqual(rc, 2, err)
        self.assertLess(took, 2)
        rc, _, err, _ = cgq("cancel", "1", "--coordinator", "nonsense")
        self.assertEqual(rc, 2, err)


# ---------------------------------------------------------------- cgq run


NOOP = """name: noop-run
space:
  x: {uniform: [0, 1]}
  y: {grid: [1, 2]}
search: {algorithm: random, samples: 3, seed: 4}
objective: {metric: score, mode: max}
trial: {kind: noop}
"""

FAIL = """name: failing
space:
  x: {grid: [1, 2, 3]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: "echo about to fail >&2; exit 3"
  resources: {cpu: 0.5}
"""

GPU = """name: needs-gpu
space:
  x: {grid: [1, 2]}
search: {algorithm: grid}
trial:
  kind: noop
  resources: {cpu: 0.5, gpu: 1}
"""

SLOW = """name: slow
space:
  x: {grid: [1, 2]}
search: {algorithm: grid}
trial:
  command: sleep 60
  resources: {cpu: 0.5}
"""


class RunTest(TmpCase):
    @classmethod
    def setUpClass(cls):
        for b in ("cgq-coordinator", "cgq-worker"):
            if not os.access(os.path.join(BIN, b), os.X_OK):
                raise unittest.SkipTest("%s is not built in %s" % (b, BIN))
        cls.make_tmp()

    @classmethod
    def tearDownClass(cls):
        cls.drop_tmp()

    def setUp(self):
        self.cwd = os.path.join(self.tmp, self._testMethodName[5:])
        os.makedirs(self.cwd)

    def tearDown(self):
        self.assert_nothing_left()

    def spec(self, text):
        path = os.path.join(self.cwd, "spec.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def assert_nothing_left(self):
        if not SUBREAPER:
            return
        # daemons told to stop (test_keep) may take a few seconds on a busy machine
        deadline = time.monotonic() + 20
        while my_children() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = my_children()
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        self.assertEqual(left, [], "processes left running")

    def test_json(self):
        rc, out, err, _ = cgq("run", self.spec(NOOP), "--format", "json", "--cpus", "1",
                              "--gpus", "none", cwd=self.cwd, timeout=60)
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["job"], 1)
        self.assertEqual(doc["state"], "finished")
        self.assertEqual(len(doc["trials"]), 6)
        scores = [t["metrics"]["score"] for t in doc["trials"]]
        self.assertEqual(scores, sorted(scores, reverse=True), "best first")
        self.assertIn("job 1 finished: 6 trials succeeded", err)
        for name in ("redis.log", "coordinator.log", "worker-1.log"):
            self.assertTrue(os.path.isfile(os.path.join(self.cwd, ".cgq", "logs", name)), name)
        self.assertTrue(os.path.isdir(os.path.join(self.cwd, ".cgq", "redis", "appendonlydir")))
        # the second run in the same directory continues the numbering
        rc, out, err, _ = cgq("run", self.spec(NOOP), "--top", "2", "--workers", "2",
                              cwd=self.cwd, timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertIn("job 2 ", err)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["rank", "trial", "score", "x", "y", "duration"])
        self.assertEqual(len(lines), 3, out)

    def test_refuses_jobs_it_cannot_run_alone(self):
        # A study's trials run in a Python process; an external job's points
        # come from a searcher process: cgq run alone would wait for ever.
        for trial, search, want in (
                ("trial: {kind: client}", "{samples: 3}", "kind: client"),
                ("trial: {kind: noop}", "{algorithm: external, samples: 3}",
                 "cgq optuna-search")):
            rc, out, err, _ = cgq("run", self.spec(
                "space: {x: {uniform: [0, 1]}}\nsearch: %s\n"
                "objective: {metric: x, mode: max}\n%s\n" % (search, trial)),
                cwd=self.cwd, timeout=30)
            self.assertEqual(rc, 2, err)
            self.assertIn("cgq run cannot run this job alone", err)
            self.assertIn(want, err)
            self.assertFalse(os.path.exists(os.path.join(self.cwd, ".cgq", "redis")), err)

    def test_reads_after_run(self):
        # Issue 23: after a cgq run, the read commands run from the same
        # directory read its state, with no --keep decided in advance.
        rc, out, err, _ = cgq("run", self.spec(NOOP), "--cpus", "1", "--gpus", "none",
                              cwd=self.cwd, timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertIn("cgq results 1", err, "the run says how to read its state again")
        sock = os.path.join(self.cwd, ".cgq", "redis.sock")
        self.assertFalse(os.path.exists(sock), "the run's Redis is stopped")
        rc, out, err, _ = cgq("results", "1", "--format", "json", cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual((doc["job"], doc["state"], len(doc["trials"])), (1, "finished", 6))
        self.assertIn("reading the state of the cgq run in ./.cgq", err)
        for args in (("status",), ("status", "1"), ("pareto", "1"), ("logs", "1", "0"),
                     ("workers",), ("plot", "1", "--out", "p.svg")):
            rc, out, err, _ = cgq(*args, cwd=self.cwd)
            if args[0] == "pareto":  # one objective: pareto says so, from the state
                self.assertEqual(rc, 2, err)
                self.assertIn("one objective", err)
                continue
            self.assertEqual(rc, 0, "%s: %s" % (args, err))
        self.assertTrue(os.path.getsize(os.path.join(self.cwd, "p.svg")) > 0)
        self.assertIn("noop-run", cgq("status", cwd=self.cwd)[1])
        # nothing is left running, and the data was only read: a second run
        # continues the numbering and the first job reads the same
        self.assertFalse(os.path.exists(sock) and my_children())
        rc, _, err, _ = cgq("run", self.spec(NOOP), cwd=self.cwd, timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertIn("job 2 ", err)
        rc, out, err, _ = cgq("results", "1", "--format", "json", cwd=self.cwd)
        self.assertEqual(json.loads(out)["trials"], doc["trials"])
        # --redis or CGQ_REDIS name another Redis: the state here is not read
        rc, out, err, _ = cgq("status", env={"CGQ_REDIS": "redis://127.0.0.1:1/0"}, cwd=self.cwd)
        self.assertEqual(rc, 1)
        self.assertNotIn("./.cgq", err)
        self.assertIn("127.0.0.1:1", err)
        # state that redis-server cannot load: the command says so, and why
        aof = os.path.join(self.cwd, ".cgq", "redis", "appendonlydir")
        manifest = [f for f in os.listdir(aof) if f.endswith(".manifest")][0]
        with open(os.path.join(aof, manifest), "w") as f:
            f.write("this is no manifest\n")
        rc, out, err, _ = cgq("results", "1", cwd=self.cwd)
        self.assertEqual(rc, 1, err)
        self.assertIn("could not open the state of a cgq run in ./.cgq/redis", err)
        self.assertIn("redis-read.log", err)

    def test_read_after_a_killed_run_and_a_killed_reader(self):
        # A power cut on both sides: cgq run killed -9 mid-job, then a read
        # command killed -9 while it holds the private Redis it started.
        # The state reads back, and nothing is left running.
        env = dict(os.environ)
        env.pop("CGQ_REDIS", None)
        run = subprocess.Popen([CGQ, "run", self.spec(SLOW), "--cpus", "1", "--gpus", "none"],
                               cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, env=env)
        for _ in range(20):  # "cgq: job 1 (slow): 2 trials on 1 local worker"
            line = run.stderr.readline()
            if not line or b"job 1 " in line:
                break
        self.assertIn(b"job 1 ", line)
        time.sleep(1.5)  # the trials are running
        run.kill()
        run.wait(10)
        run.stderr.close()
        sock = os.path.join(self.cwd, ".cgq", "redis.sock")
        deadline = time.monotonic() + 20
        while os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.1)  # the tied daemons stop with it
        rc, out, err, _ = cgq("status", "1", cwd=self.cwd, timeout=30)
        self.assertEqual(rc, 0, err)
        self.assertIn("job 1  slow  running", out, "as the killed run left it")
        watch = subprocess.Popen([CGQ, "watch", "1", "--interval", "200"], cwd=self.cwd,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env)
        first = watch.stdout.readline().decode()
        self.assertIn("0/2", first)
        self.assertTrue(os.path.exists(sock), "the reader's own redis-server serves the state")
        watch.kill()
        watch.wait(10)
        watch.stdout.close()
        watch.stderr.close()
        deadline = time.monotonic() + 10
        while os.path.exists(sock) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertFalse(os.path.exists(sock), "the private redis-server went with its reader")

    def test_several_objectives_everywhere(self):
        # Issue 23: a job with several objectives shows its front wherever a
        # leaderboard appears, not "top 10" by trial id and "objective none".
        spec = self.spec("""name: two-objectives
space:
  x: {uniform: [0, 1]}
  y: {uniform: [0, 1]}
search: {algorithm: random, samples: 16, seed: 3}
objectives: [{metric: x, mode: min}, {metric: y, mode: max}]
trial: {kind: noop}
""")
        rc, out, err, _ = cgq("run", spec, "--cpus", "1", "--gpus", "none", cwd=self.cwd, timeout=60)
        self.assertEqual(rc, 0, err)
        rc, js, err, _ = cgq("results", "1", "--format", "json", cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        doc = json.loads(js)
        pts = {t["id"]: (t["metrics"]["x"], t["metrics"]["y"]) for t in doc["trials"]}
        self.assertEqual(len(pts), 16)

        def dominated(a):
            return any(b[0] <= a[0] and b[1] >= a[1] and b != a for b in pts.values())
        front = sorted((i for i, p in pts.items() if not dominated(p)), key=lambda i: pts[i][0])
        self.assertGreater(len(front), 1)
        self.assertEqual(doc["objectives"], [{"metric": "x", "mode": "min"},
                                             {"metric": "y", "mode": "max"}])
        self.assertEqual(doc["front"], front, "the front's ids, best first in x")
        self.assertIn("Pareto front: %d of 16 succeeded trials (objectives x (minimize), y (maximize))"
                      % len(front), out)
        rows = out[out.index("trial "):].splitlines()[1:1 + len(front)]
        self.assertEqual([int(r.split()[0]) for r in rows], front, out)
        self.assertIn("cgq pareto 1", out)

        rc, out, err, _ = cgq("status", cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"two-objectives\s+finished\s+16/16\s+0\s+0\s+front of %d\s"
                         % len(front))
        rc, out, err, _ = cgq("status", "1", cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        self.assertIn("objectives  x (minimize), y (maximize)", out)
        self.assertRegex(out, r"front\s+%d trials \(cgq pareto 1\)" % len(front))
        self.assertNotIn("objective   none", out)
        rows = out[out.index("trial "):].splitlines()[1:]
        self.assertEqual([int(r.split()[0]) for r in rows[:min(5, len(front))]], front[:5], out)

        svg = os.path.join(self.cwd, "front.svg")
        rc, out, err, _ = cgq("plot", "1", "--out", svg, cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        self.assertIn("the Pareto front, %d of 16 succeeded trials" % len(front), out)
        import xml.etree.ElementTree as ET
        ns = {"s": "http://www.w3.org/2000/svg"}
        plots = ET.parse(svg).getroot().findall("s:svg", ns)
        self.assertEqual(len(plots), 2, "the front, then the hypervolume")
        series = {g.get("data-name"): g for g in plots[0].findall("s:g", ns)}
        self.assertEqual(len(series["Pareto front"].findall("s:circle", ns)), len(front))
        self.assertEqual(len(series["dominated"].findall("s:circle", ns)), 16 - len(front))
        hv = {g.get("data-name"): g for g in plots[1].findall("s:g", ns)}["hypervolume so far"]
        ys = [float(p.split(",")[1]) for p in hv.find("s:polyline", ns).get("points").split()]
        self.assertEqual(ys, sorted(ys, reverse=True), "the hypervolume never shrinks")
        self.assertLess(ys[-1], ys[0], "and grows")

    def test_plot_what_researchers_report(self):
        # Issue 23, item 6: curves when the objective comes only at the end,
        # the x axis named after what it is, early-stopped trials drawn, and
        # a legend that covers no point.
        with open(os.path.join(self.cwd, "lc.py"), "w") as f:
            f.write("""import json, os, sys, time
q, once = int(sys.argv[1]), sys.argv[2] == "once"
epochs = 1 if once else 9
for e in range(1, epochs + 1):
    rep = {"epoch": e, "loss": (q + 1) + 3.0 / e}
    if e == epochs:
        rep["val"] = 10.0 - q - (0 if once else 3.0 / e)
    os.write(3, (json.dumps(rep) + "\\n").encode())
    time.sleep(0.05)
""")
        base = """name: curves
space:
  q: {grid: [0, 1, 2, 3, 4, 5]}
search: {algorithm: grid, concurrency: 1}
objective: {metric: %s, mode: %s}
%s
trial: {command: "python3 {spec_dir}/lc.py {q} %s"}
"""
        # the objective only in the last report: the curves are of loss, over epochs
        rc, _, err, _ = cgq("run", self.spec(base % ("val", "max", "", "each")), "--cpus", "1",
                            "--gpus", "none", cwd=self.cwd, timeout=120)
        self.assertEqual(rc, 0, err)
        svg = os.path.join(self.cwd, "a.svg")
        rc, out, err, _ = cgq("plot", "1", "--out", svg, cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        self.assertIn("learning curves (loss) of 5", out)
        import xml.etree.ElementTree as ET
        ns = {"s": "http://www.w3.org/2000/svg"}
        plots = ET.parse(svg).getroot().findall("s:svg", ns)
        self.assertEqual(len(plots), 2)
        self.assertEqual(plots[1].find("s:text[@class='xlabel']", ns).text, "epoch")
        for g in plots[1].findall("s:g[@class='series']", ns):
            self.assertEqual(len(g.find("s:polyline", ns).get("points").split()), 9)
        # the legend sits where no point is
        for plot in plots:
            box = plot.find("s:rect[@class='legend']", ns)
            x0, y0 = float(box.get("x")), float(box.get("y"))
            x1, y1 = x0 + float(box.get("width")), y0 + float(box.get("height"))
            pts = [(float(c.get("cx")), float(c.get("cy")))
                   for g in plot.findall("s:g[@class='series']", ns)
                   for c in g.findall("s:circle", ns)]
            pts += [tuple(map(float, p.split(",")))
                    for g in plot.findall("s:g[@class='series']", ns)
                    for l in g.findall("s:polyline", ns) for p in l.get("points").split()]
            inside = [p for p in pts if x0 <= p[0] <= x1 and y0 <= p[1] <= y1]
            self.assertEqual(inside, [], "points under the legend")

        # each trial reports once: no curves, and the reason
        rc, _, err, _ = cgq("run", self.spec(base % ("val", "max", "", "once")), "--cpus", "1",
                            "--gpus", "none", cwd=self.cwd, timeout=120)
        self.assertEqual(rc, 0, err)
        rc, out, err, _ = cgq("plot", "2", "--out", svg, cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        self.assertIn("no learning curves: the top trials reported each metric at most once", out)

        # ASHA stops trials: they are on the plot, as their own series
        asha = "early_stop: {algorithm: asha, attribute: epoch, grace: 1, reduction: 3, max: 9}"
        rc, _, err, _ = cgq("run", self.spec(base % ("loss", "min", asha, "each")), "--cpus", "1",
                            "--gpus", "none", cwd=self.cwd, timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertRegex(err, r"job 3 finished: \d trials? succeeded, \d stopped early in ")
        rc, js, err, _ = cgq("results", "3", "--format", "json", cwd=self.cwd)
        stopped = [t for t in json.loads(js)["trials"] if t["state"] == "stopped"]
        self.assertTrue(stopped, js)
        rc, out, err, _ = cgq("plot", "3", "--out", svg, cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        first = ET.parse(svg).getroot().findall("s:svg", ns)[0]
        series = {g.get("data-name"): g for g in first.findall("s:g[@class='series']", ns)}
        self.assertEqual(len(series["stopped early"].findall("s:circle", ns)), len(stopped))
        self.assertEqual(len(series["each trial"].findall("s:circle", ns)), 6 - len(stopped))

    def test_failing(self):
        rc, out, err, _ = cgq("run", self.spec(FAIL), "--cpus", "1", cwd=self.cwd, timeout=60)
        self.assertEqual(rc, 1, err)
        self.assertIn("no trial succeeded", out)
        self.assertIn("0 succeeded, 3 failed", err)
        self.assertIn("exit status 3", err)
        self.assertIn("about to fail", err)

    def test_fail_fast(self):
        # Issue 23, item 3: a typo in the objective's metric made every trial
        # fail the same way; the job stops after search.fail_fast (5) of them.
        spec = """name: typo
space:
  x: {grid: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]}
search: {algorithm: grid, concurrency: 1%s}
objective: {metric: scroe, mode: max}
trial: {command: "echo '{{\\"score\\": {x}, \\"loss\\": 1}}' >&3", resources: {cpu: 0.5}}
"""
        rc, out, err, _ = cgq("run", self.spec(spec % ""), "--cpus", "1", "--gpus", "none",
                              cwd=self.cwd, timeout=60)
        self.assertEqual(rc, 1, err)
        self.assertIn("job 1 failed: its first 5 trials failed and none succeeded "
                      "(search.fail_fast: 5; 0 runs them all); the last error: result has no "
                      "numeric metric 'scroe' (metrics: score, loss); did you mean 'score'? "
                      "report it, or fix objective.metric", err)
        doc = json.loads(cgq("results", "1", "--format", "json", cwd=self.cwd)[1])
        self.assertEqual(doc["state"], "failed")
        states = [t["state"] for t in doc["trials"]]
        self.assertEqual(states.count("failed"), 5, states)
        self.assertEqual(len([t for t in doc["trials"] if t["state"] not in ("failed", "cancelled")]),
                         0, states)
        failed = [t for t in doc["trials"] if t["state"] == "failed"]
        for t in failed:  # the metrics a re-ranking needs are kept, and named in the error
            self.assertEqual(t["metrics"], {"score": t["params"]["x"], "loss": 1}, t)
        out = cgq("status", "1", cwd=self.cwd)[1]
        self.assertRegex(out, r"job 1  typo  failed")
        self.assertIn("error       its first 5 trials failed", out)
        self.assertIn("20/20 (15 cancelled) done", out)
        # fail_fast: 0 runs them all
        rc, out, err, _ = cgq("run", self.spec(spec % ", fail_fast: 0"), "--cpus", "1",
                              "--gpus", "none", cwd=self.cwd, timeout=120)
        self.assertEqual(rc, 1, err)
        self.assertIn("0 succeeded, 20 failed", err)
        # one success is enough to keep going: the failures are the trials' own
        ok_once = spec.replace("scroe", "score").replace(
            "echo '", "test {x} = 3 || exit 1; echo '")
        rc, out, err, _ = cgq("run", self.spec(ok_once % ""), "--cpus", "1", "--gpus", "none",
                              cwd=self.cwd, timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertIn("1 succeeded, 19 failed", err)

    def test_leaderboard_shows_what_the_objective_is_made_of(self):
        # Issue 23: an expression objective showed only its value; now its
        # metrics too, under the expression's short name.
        spec = self.spec("""name: expr
space:
  acc: {grid: [0.5, 0.9, 0.7]}
  lat: {grid: [9]}
search: {algorithm: grid}
objective: {expr: "np.power(100, acc)/(np.log10(lat+1)+1)", name: score, mode: max}
trial: {kind: noop}
""")
        rc, out, err, _ = cgq("validate", spec, cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        self.assertIn("objective: maximize score = expr np.power(100, acc)/(np.log10(lat+1)+1)", out)
        rc, out, err, _ = cgq("run", spec, "--cpus", "1", "--gpus", "none", cwd=self.cwd, timeout=60)
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        # a noop trial reports its params as metrics: the names clash, so say which is which
        self.assertEqual(lines[0].split()[:7], ["rank", "trial", "score", "metrics.acc",
                                                "metrics.lat", "acc", "lat"])
        top = lines[1].split()
        self.assertEqual(top[3:5], ["0.9", "9"], out)
        self.assertAlmostEqual(float(top[2]), 100 ** 0.9 / 2, places=3)
        self.assertIn("score=31.5479 (trial 1)", cgq("status", cwd=self.cwd)[1])
        self.assertIn("objective   score (max)", cgq("status", "1", cwd=self.cwd)[1])

    def test_stages_inspected(self):
        # Issue 23, item 4: per-stage runs, logs and times; both values of a
        # metric two stages report; attempts that say 1 when nothing retried.
        spec = self.spec("""name: staged
space: {x: {grid: [1, 2]}}
search: {algorithm: grid}
objective: {metric: loss, mode: min}
trial:
  stages:
    - name: train
      command: "echo train-out-{x}; sleep 0.2; echo '{{\\"loss\\": {x}, \\"acc\\": 0.5}}' >&3"
      resources: {cpu: 0.5}
    - name: measure
      command: "echo measure-out-{x}; echo '{{\\"loss\\": 1{x}, \\"ms\\": 3}}' >&3"
      resources: {cpu: 0.5}
""")
        rc, out, err, _ = cgq("run", spec, "--cpus", "1", "--gpus", "none", cwd=self.cwd, timeout=60)
        self.assertEqual(rc, 0, err)
        doc = json.loads(cgq("results", "1", "--format", "json", cwd=self.cwd)[1])
        for t in doc["trials"]:
            x = t["params"]["x"]
            self.assertEqual(t["metrics"]["loss"], 10 + x, "the later stage's, for the objective")
            self.assertEqual((t["metrics"]["train.loss"], t["metrics"]["measure.loss"]), (x, 10 + x))
            self.assertNotIn("train.acc", t["metrics"], "no clash, no prefix")
            self.assertEqual(t["attempts"], 1, "never retried, two stages")
            self.assertEqual(sorted(t["runs"]), ["measure", "train"])
            tr, me = t["runs"]["train"], t["runs"]["measure"]
            self.assertEqual((tr["attempt"], me["attempt"]), (1, 2))
            self.assertLessEqual(tr["finished"], me["started"] + 0.01)
            self.assertGreaterEqual(tr["duration"], 0.2)
            self.assertTrue(os.path.isdir(tr["trial_dir"]) and tr["trial_dir"] != me["trial_dir"])
        rc, out, err, _ = cgq("results", "1", cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        row = out.splitlines()[1].split()
        self.assertEqual(row[:2], ["0", "succeeded"])
        self.assertIn("1", row, "attempts 1")
        rc, out, err, _ = cgq("logs", "1", "0", cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"=== stage train: succeeded, attempt 1 on local-1, [\d.]+s\n")
        self.assertLess(out.index("train-out-1"), out.index("=== stage measure"))
        self.assertIn("measure-out-1", out)
        rc, out, err, _ = cgq("logs", "1", "0", "--stage", "measure", cwd=self.cwd)
        self.assertEqual(rc, 0, err)
        self.assertIn("measure-out-1", out)
        self.assertNotIn("train-out-1", out)
        rc, out, err, _ = cgq("logs", "1", "0", "--stage", "nope", cwd=self.cwd)
        self.assertEqual(rc, 2, err)
        self.assertIn("trial 0 has no stage 'nope' (stages: train, measure)", err)

    def test_missing_script(self):
        # a typo in the script's name: refused before anything starts
        with open(os.path.join(self.cwd, "train.py"), "w") as f:
            f.write("print('hi')\n")
        spec = self.spec("""name: typo
trial: {command: "python3 {spec_dir}/trian.py --x 1"}
""")
        for cmd in ("validate", "run"):
            rc, out, err, took = cgq(cmd, spec, cwd=self.cwd, timeout=60)
            self.assertEqual(rc, 2, err)
            self.assertIn("spec.yaml: trial.command runs {spec_dir}/trian.py, but there is no "
                          "%s/trian.py (did you mean train.py?) (every trial would fail: fix the "
                          "path)" % os.path.realpath(self.cwd), err)
            self.assertLess(took, 10)
        self.assertFalse(os.path.exists(os.path.join(self.cwd, ".cgq")), "run started nothing")
        # submit only warns: the workers may see another file system there
        rc, out, err, _ = cgq("submit", spec, "--coordinator", "tcp://127.0.0.1:1", cwd=self.cwd,
                              timeout=30)
        self.assertIn("warning: trial.command runs {spec_dir}/trian.py", err)
        # a path with a placeholder is not checked; an existing one passes
        for cmd in ("python3 {spec_dir}/{script}.py", "python3 {spec_dir}/train.py"):
            spec = self.spec("name: ok\nspace: {script: {choice: [a]}}\ntrial: {command: \"%s\"}\n"
                             % cmd)
            rc, out, err, _ = cgq("validate", spec, cwd=self.cwd)
            self.assertEqual(rc, 0, err)

    def test_unschedulable(self):
        rc, out, err, took = cgq("run", self.spec(GPU), "--gpus", "none", cwd=self.cwd,
                                 timeout=60)
        self.assertEqual(rc, 1, err)
        self.assertRegex(err, r"cgq: trial 0 is unschedulable: .*gpu")
        self.assertIn("cgq run --gpus fake:N gives them N pretend GPUs", err)  # issue 23
        self.assertLess(took, 20)

    def test_interrupt(self):
        env = dict(os.environ)
        env.pop("CGQ_REDIS", None)
        p = subprocess.Popen([CGQ, "run", self.spec(SLOW), "--cpus", "1"], cwd=self.cwd,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        lines = []
        started = threading.Event()

        def pump():
            for raw in p.stderr:
                lines.append(raw.decode("utf-8", "replace"))
                if "running 2" in lines[-1]:
                    started.set()
        th = threading.Thread(target=pump, daemon=True)
        th.start()
        self.assertTrue(started.wait(30), "both trials running:\n" + "".join(lines))
        p.send_signal(signal.SIGINT)
        try:
            rc = p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            raise
        th.join(5)
        p.stdout.close()
        p.stderr.close()
        err = "".join(lines)
        self.assertEqual(rc, 130, err)
        self.assertIn("interrupted; cancelling job 1", err)
        for mark in SANITIZER:
            self.assertNotIn(mark, err)

    def test_keep(self):
        rc, out, err, _ = cgq("run", self.spec(NOOP), "--keep", "--cpus", "1", cwd=self.cwd,
                              timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertIn("left running (--keep)", err)
        with open(os.path.join(self.cwd, ".cgq", "pids")) as f:
            pids = [int(x) for x in f.read().split()]
        self.assertEqual(len(pids), 3, "worker, coordinator, redis")
        sock = os.path.join(self.cwd, ".cgq", "redis.sock")
        rc, out, err, _ = cgq("status", "1", env={"CGQ_REDIS": "unix://" + sock})
        self.assertEqual(rc, 0, err)
        self.assertIn("finished", out)
        # a second run refuses to share .cgq with the running Redis
        rc, out, err, _ = cgq("run", self.spec(NOOP), cwd=self.cwd, timeout=30)
        self.assertEqual(rc, 1, err)
        self.assertIn("already serves", err)
        for pid in pids:
            os.kill(pid, signal.SIGTERM)


if __name__ == "__main__":
    if not os.access(CGQ, os.X_OK) or not shutil.which("redis-server"):
        print("skipped: needs %s and redis-server" % CGQ, file=sys.stderr)
        sys.exit(77)
    unittest.main(verbosity=2)
