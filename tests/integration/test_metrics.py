#!/usr/bin/env python3
"""The coordinator's /metrics: the page parses strictly as Prometheus text
(format 0.0.4; the parser is here, not a library), and after real jobs its
numbers are Redis's: trials ended by state against the job hashes,
dispatches against the trial attempts and cgq:coordinator, queue depth and
per-job counts of a blocked job, nodes alive. Unknown paths are 404, other
methods 405. A standby serves /metrics too and says it stands by; a
non-loopback --metrics is refused without --metrics-public."""

import math
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, Proc, binary, free_port, main, tail  # noqa: E402

SCRIPT = r'''
import json, os, sys
i = int(sys.argv[1])
if i in (1, 4):
    sys.exit(3)
os.write(3, (json.dumps({"v": i}) + "\n").encode())
'''

SPEC = '''name: metrics-grid
space:
  i: {grid: [0, 1, 2, 3, 4, 5]}
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/t.py {i}
  resources: {cpu: 1}
'''

BLOCKED = '''name: "needs \\"a\\" gpu"
space:
  i: {grid: [0, 1]}
trial:
  command: "true"
  resources: {cpu: 1, gpu: 1}
'''

NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class ParseError(AssertionError):
    pass


def parse_value(text, where):
    if text in ("+Inf", "Inf"):
        return math.inf
    if text == "-Inf":
        return -math.inf
    if text == "NaN":
        return math.nan
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise ParseError("%s: %r is not a sample value" % (where, text))
    return float(text)


def parse_labels(s, i, where):
    """Parses {a="x",b="y"} starting at s[i] == '{'; returns (dict, next index)."""
    labels = {}
    i += 1
    while True:
        if s[i] == "}":
            return labels, i + 1
        m = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*").match(s, i)
        if not m:
            raise ParseError("%s: bad label name at column %d" % (where, i + 1))
        name = m.group(0)
        i = m.end()
        if s[i:i + 2] != '="':
            raise ParseError("%s: label %s is not followed by =\"" % (where, name))
        i += 2
        val = []
        while True:
            if i >= len(s):
                raise ParseError("%s: unterminated label value" % where)
            ch = s[i]
            if ch == "\\":
                nxt = s[i + 1:i + 2]
                if nxt not in ("\\", '"', "n"):
                    raise ParseError("%s: bad escape \\%s in a label value" % (where, nxt))
                val.append({"\\": "\\", '"': '"', "n": "\n"}[nxt])
                i += 2
            elif ch == '"':
                i += 1
                break
            elif ch == "\n":
                raise ParseError("%s: raw newline in a label value" % where)
            else:
                val.append(ch)
                i += 1
        if name in labels:
            raise ParseError("%s: label %s twice" % (where, name))
        labels[name] = "".join(val)
        if s[i] == ",":
            i += 1
        elif s[i] != "}":
            raise ParseError("%s: expected , or } after label %s" % (where, name))


def parse_exposition(text):
    """Strict parse of the text format. Returns {family: {"type", "help",
    "samples": [(name, labels, value)]}}; raises ParseError."""
    if not text.endswith("\n"):
        raise ParseError("the page does not end with a newline")
    families = {}
    order = []
    seen = set()
    current = None

    def family_of(name):
        for fam in (name, re.sub(r"_(bucket|sum|count)$", "", name)):
            if fam in families:
                f = families[fam]
                if fam != name and f["type"] not in ("histogram", "summary"):
                    continue
                return fam
        return None

    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = "line %d (%r)" % (n, line[:120])
        if line == "":
            raise ParseError("%s: empty line" % where)
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME_RE.match(name):
                    raise ParseError("%s: bad metric name %r" % (where, name))
                f = families.setdefault(name, {"type": None, "help": None, "samples": []})
                if name not in order:
                    order.append(name)
                if f["samples"]:
                    raise ParseError("%s: %s after its samples" % (where, parts[1]))
                if parts[1] == "HELP":
                    if f["help"] is not None:
                        raise ParseError("%s: second HELP for %s" % (where, name))
                    f["help"] = parts[3] if len(parts) > 3 else ""
                else:
                    if f["type"] is not None:
                        raise ParseError("%s: second TYPE for %s" % (where, name))
                    if len(parts) != 4 or parts[3] not in TYPES:
                        raise ParseError("%s: bad TYPE" % where)
                    f["type"] = parts[3]
                current = name
            continue
        m = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*").match(line)
        if not m:
            raise ParseError("%s: no metric name" % where)
        name = m.group(0)
        i = m.end()
        labels = {}
        if i < len(line) and line[i] == "{":
            labels, i = parse_labels(line, i, where)
        if line[i:i + 1] != " ":
            raise ParseError("%s: no space before the value" % where)
        rest = line[i + 1:].split(" ")
        if len(rest) not in (1, 2):
            raise ParseError("%s: value then at most a timestamp" % where)
        value = parse_value(rest[0], where)
        fam = family_of(name)
        if fam is None or families[fam]["type"] is None:
            raise ParseError("%s: sample %s has no # TYPE line before it" % (where, name))
        if fam != current:
            raise ParseError("%s: sample of %s outside its family's block" % (where, fam))
        key = (name, tuple(sorted(labels.items())))
        if key in seen:
            raise ParseError("%s: duplicate sample" % where)
        seen.add(key)
        families[fam]["samples"].append((name, labels, value))

    for fam, f in families.items():
        if f["type"] is None:
            raise ParseError("%s: HELP without TYPE" % fam)
        if f["type"] == "counter":
            if not fam.endswith("_total"):
                raise ParseError("counter %s does not end in _total" % fam)
            for _, _, v in f["samples"]:
                if not v >= 0:
                    raise ParseError("counter %s has a negative value %r" % (fam, v))
        if f["type"] == "histogram":
            check_histogram(fam, f["samples"])
    return families


def check_histogram(fam, samples):
    series = {}
    for name, labels, v in samples:
        rest = tuple(sorted((k, x) for k, x in labels.items() if k != "le"))
        s = series.setdefault(rest, {"buckets": [], "sum": None, "count": None})
        if name == fam + "_bucket":
            if "le" not in labels:
                raise ParseError("%s: bucket without le" % fam)
            s["buckets"].append((parse_value(labels["le"], fam + " le"), v))
        elif name == fam + "_sum":
            s["sum"] = v
        elif name == fam + "_count":
            s["count"] = v
        else:
            raise ParseError("%s: sample %s is not _bucket, _sum or _count" % (fam, name))
    for rest, s in series.items():
        bs = s["buckets"]
        if not bs or bs[-1][0] != math.inf:
            raise ParseError("%s%s: the last bucket is not le=\"+Inf\"" % (fam, rest))
        for (le0, c0), (le1, c1) in zip(bs, bs[1:]):
            if not le1 > le0:
                raise ParseError("%s: bucket bounds not increasing (%r, %r)" % (fam, le0, le1))
            if c1 < c0:
                raise ParseError("%s: bucket counts not cumulative (%r then %r)" % (fam, c0, c1))
        if s["count"] is None or s["sum"] is None:
            raise ParseError("%s: missing _sum or _count" % fam)
        if bs[-1][1] != s["count"]:
            raise ParseError("%s: le=\"+Inf\" bucket %r != _count %r" % (fam, bs[-1][1], s["count"]))


def value(fams, fam, sample=None, **labels):
    for name, ls, v in fams[fam]["samples"]:
        if name == (sample or fam) and ls == {k: str(x) for k, x in labels.items()}:
            return v
    raise AssertionError("no sample %s%s; have %s" % (fam, labels, fams[fam]["samples"]))


def get(url, method="GET"):
    req = urllib.request.Request(url, method=method, data=b"x" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode()


class MetricsTest(CgqTestCase):
    def scrape(self, port):
        status, ctype, body = get("http://127.0.0.1:%d/metrics" % port)
        self.assertEqual(status, 200, body)
        self.assertTrue(ctype.startswith("text/plain; version=0.0.4"), ctype)
        try:
            return parse_exposition(body)
        except ParseError as e:
            self.fail("/metrics is not valid Prometheus text: %s\n%s" % (e, body))

    def test_parser_rejects(self):
        """The parser is strict: each of these pages must fail."""
        good = ("# HELP h_seconds x\n# TYPE h_seconds histogram\n"
                "h_seconds_bucket{le=\"1\"} 1\nh_seconds_bucket{le=\"+Inf\"} 2\n"
                "h_seconds_sum 3\nh_seconds_count 2\n")
        parse_exposition(good)
        bad = [
            good.replace("h_seconds_count 2", "h_seconds_count 3"),          # +Inf != count
            good.replace("le=\"1\"} 1", "le=\"1\"} 5"),                       # not cumulative
            good.replace("# TYPE h_seconds histogram\n", ""),               # no TYPE
            "# TYPE a gauge\na{x=\"1\" 1\n",                                  # bad labels
            "# TYPE a_total counter\na_total 1\na_total 2\n",                 # duplicate
            "# TYPE a counter\na 1\n",                                         # counter name
            "# TYPE a gauge\na one\n",                                         # value
            "# TYPE a gauge\na{x=\"\\q\"} 1\n",                               # escape
            "# TYPE a gauge\n# TYPE b gauge\na 1\n",                           # out of block
        ]
        for page in bad:
            with self.assertRaises(ParseError, msg=page):
                parse_exposition(page)

    def test_metrics_match_redis(self):
        c = self.cluster
        c.start_redis()
        port = free_port()
        c.start_coordinator(extra=("--metrics", "127.0.0.1:%d" % port))
        c.start_worker("w1", cpus=2)
        base = "http://127.0.0.1:%d" % port

        status, _, body = get(base + "/nope")
        self.assertEqual(status, 404, body)
        self.assertIn("/metrics", body)
        status, _, _ = get(base + "/metrics", method="POST")
        self.assertEqual(status, 405)

        # A blocked job: its counts and the gpu queue are stable while it waits.
        blocked = c.submit(c.write_file("blocked.yaml", BLOCKED))
        c.wait_value(lambda: c.job(blocked), lambda h: h.get("blocked"), 20,
                     "the gpu job to be blocked")
        fams = self.scrape(port)
        job = c.job(blocked)
        waiting = sum(1 for h in c.trials(blocked).values()
                      if h.get("state") in ("pending", "unschedulable"))
        self.assertGreaterEqual(waiting, 1)
        for state in ("pending", "running", "succeeded", "failed", "stopped", "cancelled",
                      "unschedulable"):
            self.assertEqual(value(fams, "cgq_job_trials", job=blocked, name='needs "a" gpu',
                                   state=state), int(job[state]), state)
        self.assertEqual(value(fams, "cgq_queue_depth", **{"class": "gpu"}), waiting)
        self.assertEqual(value(fams, "cgq_queue_depth", **{"class": "cpu"}), 0)
        self.assertEqual(value(fams, "cgq_jobs_active"), 1)
        self.assertEqual(value(fams, "cgq_nodes_alive", kind="worker"), 1)
        self.assertEqual(value(fams, "cgq_nodes_alive", kind="device-runner"), 0)
        self.assertEqual(value(fams, "cgq_coordinator_leader"), 1)
        self.assertEqual(value(fams, "cgq_coordinator_lease_epoch"), c.epoch)
        r = c.cgq("cancel", blocked)
        self.assertEqual(r.returncode, 0, r.stderr)

        # A scraper that sends half a request and stalls holds a connection,
        # never the loop: the job runs and other scrapes are answered.
        slow = socket.create_connection(("127.0.0.1", port), 5)
        slow.sendall(b"GET /metr")
        c.write_file("t.py", SCRIPT)
        j = c.submit(c.write_file("grid.yaml", SPEC))
        job = c.wait_job(j, 60)
        self.scrape(port)
        slow.close()
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual((job.get("succeeded"), job.get("failed")), ("4", "2"), job)

        # cgq:coordinator's counters are written once a second: wait for the
        # one after the job, then both sides must agree.
        trials = c.trials(j)
        attempts = sum(int(h.get("attempt") or 0) for h in trials.values())
        c.wait_value(lambda: c.redis.hgetall("cgq:coordinator").get("assigns"),
                     lambda v: v == str(attempts), 10, "cgq:coordinator assigns")
        fams = self.scrape(port)
        jobs = [c.job(blocked), c.job(j)]
        for state in ("succeeded", "failed", "stopped", "cancelled"):
            want = sum(int(h.get(state) or 0) for h in jobs)
            self.assertEqual(value(fams, "cgq_trials_ended_total", state=state), want,
                             "trials %s: /metrics against the job hashes %s" % (state, jobs))
        self.assertEqual(value(fams, "cgq_dispatches_total"), attempts)
        coord = c.redis.hgetall("cgq:coordinator")
        self.assertEqual(value(fams, "cgq_results_total"), int(coord["results"]))
        self.assertEqual(value(fams, "cgq_frames_dropped_total"), int(coord["dropped_frames"]))
        self.assertEqual(value(fams, "cgq_messages_rejected_total"), int(coord["rejected"]))
        self.assertEqual(value(fams, "cgq_dispatch_latency_seconds",
                               "cgq_dispatch_latency_seconds_count"), attempts)
        self.assertGreater(value(fams, "cgq_redis_batch_seconds", "cgq_redis_batch_seconds_count"), 0)
        self.assertEqual(value(fams, "cgq_jobs_active"), 0)
        self.assertEqual(fams["cgq_job_trials"]["samples"], [], "ended jobs leave the page")
        self.assertEqual(value(fams, "cgq_queue_depth", **{"class": "gpu"}), 0)
        for fam, kind in (("cgq_dispatches_total", "counter"),
                          ("cgq_dispatch_latency_seconds", "histogram"),
                          ("cgq_redis_batch_seconds", "histogram"),
                          ("cgq_devices", "gauge"), ("cgq_peers_refused_total", "counter"),
                          ("cgq_notifications_total", "counter")):
            self.assertEqual(fams[fam]["type"], kind, fam)

    def test_standby_and_bind_rules(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        port = free_port()
        argv = [binary("cgq-coordinator"), "--redis", c.redis_url, "--bind",
                "tcp://127.0.0.1:0", "--control", "tcp://127.0.0.1:0",
                "--metrics", "127.0.0.1:%d" % port]
        standby = Proc("standby", argv, c.logdir, capture_stdout=True)
        c.procs.append(standby)
        line = standby.wait_first_line(30)
        self.assertTrue(line and line.startswith("cgq-coordinator standby"),
                        "%r\n%s" % (line, tail(standby.err_path)))
        fams = self.scrape(port)
        self.assertEqual(value(fams, "cgq_coordinator_leader"), 0)
        self.assertEqual(value(fams, "cgq_coordinator_lease_epoch"), c.epoch)
        self.assertEqual(value(fams, "cgq_jobs_active"), 0)

        # Beyond loopback: refused (exit 2, the reason and the way out), and
        # accepted with --metrics-public.
        r = subprocess.run([binary("cgq-coordinator"), "--redis", c.redis_url, "--bind",
                            "tcp://127.0.0.1:0", "--control", "tcp://127.0.0.1:0",
                            "--metrics", "0.0.0.0:%d" % free_port()],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--metrics-public", r.stderr)
        r = subprocess.run([binary("cgq-coordinator"), "--redis", c.redis_url, "--metrics",
                            "nonsense"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("HOST:PORT", r.stderr)


if __name__ == "__main__":
    main()
