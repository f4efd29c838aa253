#!/usr/bin/env python3
"""The dashboard's JSON API (coordinator/api.h) against a real cluster: a
finished job and a running one read through /api/ are what `cgq results
--format json` says, field for field, whole and page by page; sorting,
filtering and paging happen on the server; unknown jobs and trials are 404,
bad queries 400, hostile paths and a huge query string 4xx with the server
still answering; a param value holding HTML comes back as the same string;
/metrics is served by the same --http server; pages carry the CSP; a job
with two objectives has the front `cgq results` names; devices read as
written. With
--http-token-file every path wants the token (401 without, 200 with the
bearer header, ?token= once sets an HttpOnly cookie that then suffices);
beyond loopback without a token the coordinator refuses to start."""

import functools
import http.client
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, Proc, binary, free_port, main  # noqa: E402

XSS = "<img src=x onerror=alert(1)>"

TRIAL = r'''
import json, os, sys
i = int(sys.argv[1])
if i % 5 == 4:
    sys.exit(3)
os.write(3, (json.dumps({"v": (i * 7) % 5, "loss": 1.0 / (i + 1)}) + "\n").encode())
'''

DONE = '''name: dash-done
space:
  i: {grid: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}
  s: {grid: ["%s", "plain"]}
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/t.py {i}
  resources: {cpu: 1}
''' % XSS

SLOW = r'''
import json, os, sys, time
i = int(sys.argv[1])
if i > 0:
    time.sleep(120)
os.write(3, (json.dumps({"v": i}) + "\n").encode())
'''

RUNNING = '''name: dash-running
space:
  i: {grid: [0, 1, 2, 3]}
objective: {metric: v, mode: min}
trial:
  command: python3 {spec_dir}/slow.py {i}
  resources: {cpu: 1}
'''

TWO = r'''
import json, os, sys
i = int(sys.argv[1])
os.write(3, (json.dumps({"x": i % 4, "y": 3 - i % 4 - (i // 4)}) + "\n").encode())
'''

TWO_SPEC = '''name: dash-two
space:
  i: {grid: [0, 1, 2, 3, 4, 5, 6, 7]}
objectives: [{metric: x, mode: max}, {metric: y, mode: max}]
trial:
  command: python3 {spec_dir}/two.py {i}
  resources: {cpu: 1}
'''

# The trial fields of `cgq results --format json` (cli/show.h).
RESULT_FIELDS = ("id", "state", "params", "metrics", "attempts", "node", "started", "finished",
                 "error", "warning")


# The params texts of sort_fixture's trials with the key api.c sorts on for
# params.x, as jansson reads them (not Python's json: jansson rejects a
# whole text with an integer beyond 64 bits or a real that overflows):
# (class, value): 0 a number (booleans 1 and 0), 1 a string (compared as
# UTF-8 bytes, as strcmp does), 2 an object or array, 3 missing.
# @ in a text is the trial's tie group.
PARAM_X = (
    ('{"x": @}', lambda g: (0, g)),
    ('{"x": @.5, "y": "z"}', lambda g: (0, g + 0.5)),
    ('{"y": 1, "x": -@e-1}', lambda g: (0, -g / 10)),
    ('{"x": "s@"}', lambda g: (1, b"s%d" % g)),
    ('{"x": true}', lambda g: (0, 1)),
    ('{"x": false}', lambda g: (0, 0)),
    ('{"x": [@]}', lambda g: (2, 0)),
    ('{"x": {"a": @}}', lambda g: (2, 0)),
    ('{"x": null}', lambda g: (3, 0)),
    ('{"y": @}', lambda g: (3, 0)),
    (None, lambda g: (3, 0)),  # no params field
    ('not json @', lambda g: (3, 0)),
    ('[@]', lambda g: (3, 0)),
    ('{"x": 1e400}', lambda g: (3, 0)),
    ('{"x": 123456789012345678901}', lambda g: (3, 0)),
    ('{"x": @, }', lambda g: (3, 0)),
    ('{"x": "caf\\u00e9@"}', lambda g: (1, ("caf\u00e9%d" % g).encode())),
    ('{"x": "\u00e9t\u00e9@"}', lambda g: (1, ("\u00e9t\u00e9%d" % g).encode())),
    ('{"x": 1, "x": "dup@"}', lambda g: (1, b"dup%d" % g)),
    ('{"x": "%s@"}' % XSS, lambda g: (1, (XSS + "%d" % g).encode())),
    ('{"x": 12345678901234567@}', lambda g: (0, float(12345678901234567 * 10 + g))),
)


def sort_fixture(j, n):
    """Job j (max acc) of n trials written into Redis as the coordinator
    writes them, with ties, missing values and odd JSON in params.x and
    metrics.m; returns (commands, trials), each trial a dict of what the
    sorts read: id, state, node, started, the keys of params.x and
    metrics.m, value (None: none) and ranked."""
    now = time.time()
    cmds = [("HSET", "cgq:job:{%d}" % j, "id", j, "name", "sort-keys", "state", "finished",
             "suggested", n + 2, "total", n + 2, "objective_metric", "acc",
             "objective_mode", "max", "created", now, "finished", now, "spec", "name: s"),
            ("ZADD", "cgq:jobs", now, j)]
    trials = []
    for i in range(n):  # trials n and n+1 do not exist: not listed
        g = (i * 7) % 5
        text, key = PARAM_X[i % len(PARAM_X)]
        state = ("succeeded", "succeeded", "succeeded", "failed", "running")[i % 5]
        h = ["id", i, "job", j, "state", state, "attempt", 1]
        t = {"id": i, "state": state, "x": key(g), "node": None, "started": None,
             "value": None}
        if text is not None:
            h += ["params", text.replace("@", str(g))]
        # metrics.m: a number in ties, a string, missing; acc feeds value.
        metrics, k = {}, i % 4
        if k == 0:
            metrics["m"], t["m"] = g / 4, (0, g / 4)
        elif k == 1:
            metrics["m"], t["m"] = "m%d" % (g % 2), (1, b"m%d" % (g % 2))
        elif k == 2:
            metrics["m"], t["m"] = [g], (2, 0)
        else:
            t["m"] = (3, 0)
        if state == "succeeded":
            acc = (g % 3) / 3
            if i % 3 == 0:
                metrics["acc"] = acc
                h += ["value", repr(acc)]
                t["value"] = acc
            elif i % 3 == 1:
                metrics["acc"] = acc  # no value field: the metric is the value
                t["value"] = acc
            else:
                metrics["acc"] = "high" if i % 2 else True  # no number: no value
        h += ["metrics", json.dumps(metrics)]
        if i % 6 != 5:
            node = ("w1", "w2", "", "w10")[i % 4]
            h += ["node", node]
            t["node"] = node or None
        if i % 8 != 7:
            started = (0, now - 100 + g, "junk")[i % 3] if i % 10 == 9 else now - 100 + g
            h += ["started", started]
            t["started"] = started if isinstance(started, float) and started > 0 else None
        feasible = i % 13 != 4
        if not feasible:
            h += ["feasible", 0]
        t["ranked"] = state == "succeeded" and t["value"] is not None and feasible
        cmds.append(("HSET", "cgq:job:{%d}:trial:%d" % (j, i)) + tuple(h))
        trials.append(t)
    return cmds, trials


def expected_order(trials, sort, order, state=None):
    """The ids of trials in api.c's order: a key's class first (numbers,
    strings, others, missing: missing last whichever the order), the key
    in the order asked, ties by id ascending; rank: the ranked trials best
    first (acc, max) then the rest, ties by id, all of it reversed for desc."""
    sign = -1 if order == "desc" else 1
    ts = [t for t in trials if state is None or t["state"] == state]

    def key(t):
        if sort == "params.x":
            return t["x"]
        if sort == "metrics.m":
            return t["m"]
        if sort == "value":
            return (0, t["value"]) if t["value"] is not None else (3, 0)
        if sort == "state":
            return (1, t["state"].encode())
        if sort == "started":
            return (0, t["started"]) if t["started"] is not None else (3, 0)
        return (1, t["node"].encode()) if t["node"] else (3, 0)

    def cmp(a, b):
        byid = (a["id"] > b["id"]) - (a["id"] < b["id"])
        if sort == "id":
            return sign * byid
        if sort == "rank":
            c = 0
            if a["ranked"] != b["ranked"]:
                c = -1 if a["ranked"] else 1
            elif a["ranked"] and a["value"] != b["value"]:
                c = -1 if a["value"] > b["value"] else 1
            return sign * (c or byid)
        ka, kb = key(a), key(b)
        if ka[0] != kb[0]:
            return -1 if ka[0] < kb[0] else 1
        c = (ka[1] > kb[1]) - (ka[1] < kb[1]) if ka[0] < 2 else 0
        return sign * c if c else byid
    return [t["id"] for t in sorted(ts, key=functools.cmp_to_key(cmp))]


def request(port, path, headers=None, method="GET"):
    """Sends path as given (no normalisation); returns (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8",
                                                                                    "replace")
    finally:
        conn.close()


class DashboardApiTest(CgqTestCase):

    def get_json(self, path, want=200, **kw):
        status, headers, body = request(self.port, path, **kw)
        self.assertEqual(status, want, "%s: %s" % (path, body))
        self.assertEqual(headers.get("content-type"), "application/json", path)
        return json.loads(body)

    def results(self, j):
        r = self.cluster.cgq("results", str(j), "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def all_pages(self, j, limit, **query):
        """Every trial of job j through /api/jobs/J/trials, limit at a time."""
        out, offset = [], 0
        while True:
            q = "&".join("%s=%s" % kv for kv in sorted(query.items()))
            doc = self.get_json("/api/jobs/%d/trials?offset=%d&limit=%d&%s" % (j, offset, limit,
                                                                                q))
            self.assertLessEqual(len(doc["trials"]), limit)
            out.extend(doc["trials"])
            offset += limit
            if offset >= doc["total"]:
                self.assertEqual(len(out), doc["total"])
                return out

    def assert_same_as_results(self, j):
        res = self.results(j)
        job = self.get_json("/api/jobs/%d" % j)
        for k in ("name", "state", "objective"):
            self.assertEqual(job[k], res[k], k)
        self.assertEqual(job["job"], res["job"])
        api = self.all_pages(j, 3)
        self.assertEqual([t["id"] for t in api], [t["id"] for t in res["trials"]],
                         "the API's default order is not cgq results' (best first)")
        for a, r in zip(api, res["trials"]):
            for k in RESULT_FIELDS:
                self.assertEqual(a[k], r[k], "trial %d field %s" % (r["id"], k))
        # The counts are the job hash's.
        h = self.cluster.job(j)
        for state, n in job["counts"].items():
            self.assertEqual(n, int(h.get(state, 0)), state)
        return job, api

    def test_api(self):
        c = self.cluster
        c.start_redis()
        self.port = free_port()
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        c.start_worker("w1", cpus=2)
        c.write_file("t.py", TRIAL)
        c.write_file("slow.py", SLOW)
        done = c.submit(c.write_file("done.yaml", DONE))
        c.wait_job(done, timeout=90)
        running = c.submit(c.write_file("running.yaml", RUNNING))
        c.wait_value(lambda: c.job(running),
                     lambda h: h.get("succeeded") == "1" and h.get("running") == "2", 60,
                     "job %d to have one trial done and two running" % running)

        # The jobs list: newest first, with counts and best.
        jobs = self.get_json("/api/jobs")
        self.assertEqual(jobs["total"], 2)
        self.assertEqual([x["job"] for x in jobs["jobs"]], [running, done])
        self.assertEqual(jobs["jobs"][1]["state"], "finished")
        self.assertEqual(jobs["jobs"][0]["state"], "running")
        self.assertEqual(jobs["jobs"][0]["best"], {"trial": 0, "value": 0})
        self.assertEqual(self.get_json("/api/jobs?limit=1&offset=1")["jobs"][0]["job"], done)

        # Both jobs, whole and in pages of 3, against cgq results.
        job, trials = self.assert_same_as_results(done)
        self.assertEqual(job["done"], 20)
        self.assertEqual(job["counts"]["failed"], 4)
        self.assertIn("dash-done", job["spec"])
        self.assertEqual(job["best"]["value"], 4)
        self.assertEqual(len(trials), 20)
        self.assertEqual(trials[0]["value"], 4)
        self.assert_same_as_results(running)

        # Failures grouped by the first line of their error, most first.
        groups = {}
        for t in self.results(done)["trials"]:
            if t["state"] == "failed":
                groups.setdefault(t["error"].split("\n")[0][:200], []).append(t["id"])
        want = sorted(({"error": e, "count": len(ids), "trials": sorted(ids)[:10]}
                       for e, ids in groups.items()), key=lambda g: (-g["count"], g["trials"][0]))
        fails = self.get_json("/api/jobs/%d/failures" % done)
        self.assertEqual(fails["groups"], want)
        self.assertEqual(sum(g["count"] for g in fails["groups"]), 4)
        self.assertEqual(self.get_json("/api/jobs/%d/failures" % running)["groups"], [])

        # The HTML in a param comes back as the same string.
        xss = [t for t in trials if t["params"]["s"] == XSS]
        self.assertEqual(len(xss), 10)

        # Sorting and filtering on the server.
        by_i = self.all_pages(done, 7, sort="params.i")
        keys = [(t["params"]["i"], t["id"]) for t in by_i]
        self.assertEqual(keys, sorted(keys))
        by_i_desc = self.get_json("/api/jobs/%d/trials?sort=params.i&order=desc&limit=2" % done)
        self.assertEqual([t["params"]["i"] for t in by_i_desc["trials"]], [9, 9])
        self.assertEqual(by_i_desc["total"], 20)
        ids = self.get_json("/api/jobs/%d/trials?sort=id&order=desc&offset=5&limit=4" % done)
        self.assertEqual([t["id"] for t in ids["trials"]], [14, 13, 12, 11])
        self.assertEqual(ids["total"], 20)
        past = self.get_json("/api/jobs/%d/trials?sort=id&offset=25" % done)
        self.assertEqual((past["trials"], past["total"]), ([], 20))
        failed = self.get_json("/api/jobs/%d/trials?state=failed&sort=id" % done)
        self.assertEqual(failed["total"], 4)
        self.assertEqual({t["state"] for t in failed["trials"]}, {"failed"})
        by_loss = self.get_json("/api/jobs/%d/trials?sort=metrics.loss&limit=500" % done)
        losses = [t["metrics"]["loss"] for t in by_loss["trials"] if t["metrics"]]
        self.assertEqual(losses, sorted(losses))
        self.assertEqual(len(losses), 16)
        self.assertFalse(by_loss["trials"][-1]["metrics"], "trials without the metric go last")
        by_value = self.get_json("/api/jobs/%d/trials?sort=value&order=desc&limit=500" % done)
        values = [t["value"] for t in by_value["trials"]]
        self.assertEqual(values[:16], sorted(values[:16], reverse=True))
        self.assertEqual(values[16:], [None] * 4, "missing values go last in either order")
        # The orders that need whole records (api.c's s_cmp): by duration and
        # attempts, both ways, ties by id, a trial without a run time last.
        for sort in ("duration", "attempts"):
            for order, sign in (("asc", 1), ("desc", -1)):
                rows = self.get_json("/api/jobs/%d/trials?sort=%s&order=%s&limit=500"
                                     % (done, sort, order))["trials"]
                self.assertEqual(len(rows), 20)
                want = sorted(rows, key=lambda t: (t[sort] is None,
                                                   sign * (t[sort] or 0), t["id"]))
                self.assertEqual([t["id"] for t in rows], [t["id"] for t in want],
                                 "sort=%s order=%s" % (sort, order))

        # One trial, with its reports.
        t0 = self.get_json("/api/jobs/%d/trials/0" % done)
        res0 = [t for t in self.results(done)["trials"] if t["id"] == 0][0]
        for k in RESULT_FIELDS:
            self.assertEqual(t0[k], res0[k], k)
        self.assertIsInstance(t0["reports"], list)
        self.assertEqual(t0["job"], done)

        # Nodes.
        nodes = self.get_json("/api/nodes")["nodes"]
        self.assertEqual([n["id"] for n in nodes], ["w1"])
        self.assertEqual(nodes[0]["cpus"], 2)

        # Unknown things: 404 with a JSON error.
        for path in ("/api/jobs/999", "/api/jobs/999/trials", "/api/jobs/%d/trials/999" % done,
                     "/api/nope", "/api/jobs/%d/nope" % done):
            doc = self.get_json(path, want=404)
            self.assertIn("error", doc, path)
        # Bad queries: 400.
        for q in ("limit=100000", "limit=0", "limit=abc", "offset=-1", "offset=1e3",
                  "offset=99999999999999999999999", "sort=bogus", "sort=params.", "order=up",
                  "state=nope", "limit=1%00"):
            doc = self.get_json("/api/jobs/%d/trials?%s" % (done, q), want=400)
            self.assertIn("error", doc, q)
        for path in ("/api/jobs/abc", "/api/jobs/-1", "/api/jobs/%d/trials/x" % done,
                     "/api/jobs/99999999999999999999999999"):
            self.get_json(path, want=400)

        # A member of cgq:jobs that is no job id (hand-written junk) is
        # skipped, not an error.
        c.redis.cmd("ZADD", "cgq:jobs", 1, "junk")
        self.assertEqual([x["job"] for x in self.get_json("/api/jobs")["jobs"]], [running, done])
        c.redis.cmd("ZREM", "cgq:jobs", "junk")

        # Hostile paths, a huge query string, other methods.
        for path in ("/static/../../etc/passwd", "/static/%2e%2e/%2e%2e/etc/passwd",
                     "/api/jobs/../nodes", "/" + "a" * 300, "/static//etc/passwd",
                     "/static/app.js%00.html"):
            status, _, body = request(self.port, path)
            self.assertIn(status, (400, 404), "%s: %s" % (path, body))
            self.assertNotIn("root:", body)
        status, _, _ = request(self.port, "/api/jobs?x=" + "a" * 200000)
        self.assertGreaterEqual(status, 400)
        self.assertLess(status, 500)
        status, _, _ = request(self.port, "/api/jobs", method="POST")
        self.assertEqual(status, 405)
        self.assertEqual(self.get_json("/api/jobs")["total"], 2, "still serving after all that")

        # Pages, files, /metrics on the same server; the CSP on every answer.
        for path, ctype in (("/", "text/html"), ("/jobs/%d" % done, "text/html"),
                            ("/jobs/%d/trials/3" % done, "text/html"), ("/nodes", "text/html"),
                            ("/static/app.js", "text/javascript"), ("/static/app.css", "text/css"),
                            ("/metrics", "text/plain"), ("/api/jobs", "application/json")):
            status, headers, body = request(self.port, path)
            self.assertEqual(status, 200, path)
            self.assertTrue(headers["content-type"].startswith(ctype), (path, headers))
            self.assertTrue(headers["content-security-policy"].startswith("default-src 'self'"))
            self.assertEqual(headers["x-content-type-options"], "nosniff")
        status, _, body = request(self.port, "/metrics")
        self.assertIn("cgq_jobs_active 1\n", body)
        status, _, body = request(self.port, "/")
        self.assertNotIn("<script>", body, "no inline script")
        for path in ("/jobs/abc", "/jobs/1/trials/x", "/jobs/1/trials/", "/jobs/x/trials/1",
                     "/jobs/1/trials/1/more", "/nodes/x"):
            self.assertEqual(request(self.port, path)[0], 404, path)
        self.assertEqual(request(self.port, "/static/nope.js")[0], 404)

        r = c.cgq("cancel", str(running))
        self.assertEqual(r.returncode, 0, r.stderr)
        c.wait_job(running, timeout=60)
        self.assertEqual(self.get_json("/api/jobs/%d" % running)["state"], "cancelled")

    def test_a_running_jobs_order_is_reused_briefly(self):
        """A big running job's best-first order is reused for a while (20
        times what sorting it took: api.c), its page's rows read fresh;
        after that a new best comes first."""
        c = self.cluster
        c.start_redis()
        self.port = free_port()
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        n, j, now = 20000, 50, time.time()
        c.redis.pipeline([
            ("HSET", "cgq:job:{%d}" % j, "id", j, "name", "big-running", "state", "running",
             "suggested", n, "total", n + 100, "objective_metric", "acc", "objective_mode", "max",
             "created", now, "succeeded", n, "spec", "name: big"),
            ("ZADD", "cgq:jobs", now, j)])
        batch = []
        for i in range(n):
            acc = (i * 7919 % n) / n  # a permutation: every value once, below 1
            batch.append(("HSET", "cgq:job:{%d}:trial:%d" % (j, i), "id", i, "job", j,
                          "state", "succeeded", "attempt", 1, "params", json.dumps({"i": i}),
                          "metrics", json.dumps({"acc": acc}), "value", acc))
            if len(batch) == 2000:
                c.redis.pipeline(batch)
                batch = []
        path = "/api/jobs/%d/trials?limit=3&sort=value&order=desc" % j
        t0 = time.monotonic()
        first = [t["id"] for t in self.get_json(path)["trials"]]
        cold = time.monotonic() - t0
        self.assertNotIn(123, first)
        # Trial 123 becomes the best: within the reuse, the order is the
        # kept one (123 not on the first page) ...
        c.redis.pipeline([("HSET", "cgq:job:{%d}:trial:123" % j, "value", 5, "metrics",
                           json.dumps({"acc": 5}))])
        t1 = time.monotonic()
        again = [t["id"] for t in self.get_json(path)["trials"]]
        if time.monotonic() - t1 < cold * 5:  # well within 20x the sort
            self.assertEqual(again, first, "the order was sorted again at once (cold %.3fs)"
                             % cold)
        # ... and after it, sorted again: 123 first.
        deadline = time.monotonic() + 30 * cold + 5
        while time.monotonic() < deadline:
            top = [t["id"] for t in self.get_json(path)["trials"]]
            if top[0] == 123:
                break
            time.sleep(max(0.05, cold))
        self.assertEqual(top[0], 123, "the new best never came first (cold sort %.3fs)" % cold)

    def test_sorts_on_one_key_match_python(self):
        """A job's trials sorted by a param, a metric, the value, the node,
        the start, the state and rank, both ways and with a state filter:
        the order (read page by page) is the one Python computes from what
        was written, ties, missing values, booleans, objects, escapes,
        UTF-8, duplicate members and texts jansson rejects included; a
        second request (the kept order) is the same."""
        c = self.cluster
        c.start_redis()
        self.port = free_port()
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        j, n = 70, 4 * len(PARAM_X) * 5 - 3
        cmds, trials = sort_fixture(j, n)
        c.redis.pipeline(cmds)
        checked = 0
        for sort in ("params.x", "metrics.m", "value", "node", "started", "state", "rank",
                     "id"):
            for order in ("asc", "desc"):
                for state in (None, "succeeded", "failed"):
                    if sort == "id" and state is None:
                        continue  # by id, unfiltered: the page alone (test_api)
                    if sort == "rank" and order == "asc" and state is None:
                        continue  # the leaderboard's (test_best_first_pages...)
                    q = {"sort": sort, "order": order}
                    if state:
                        q["state"] = state
                    want = expected_order(trials, sort, order, state)
                    for _ in range(2):
                        got = [t["id"] for t in self.all_pages(j, 37, **q)]
                        self.assertEqual(got, want, "sort=%s order=%s state=%s" % (sort, order,
                                                                                   state))
                    checked += 1
        self.assertEqual(checked, 8 * 2 * 3 - 3)
        # The page's rows are the trials', whole: a param text jansson
        # rejects reads as no params, the XSS one as the same string.
        rows = {t["id"]: t for t in self.all_pages(j, 500, sort="params.x")}
        self.assertEqual(len(rows), n)
        for i in range(n):
            text = PARAM_X[i % len(PARAM_X)][0]
            if text and text.startswith('{"x": "%s' % XSS):
                self.assertTrue(rows[i]["params"]["x"].startswith(XSS))
            if text in ('{"x": 1e400}', 'not json {}'):
                self.assertEqual(rows[i]["params"], {})

    def test_best_first_pages_from_the_leaderboard(self):
        """Best-first pages among the ranked trials come from the leaderboard
        sorted set (api.c s_rank_page), not from sorting every trial: the
        same order as the full sort (value, ties by id, then the unranked by
        id), for both modes, on pages that straddle ties and the end of the
        ranked trials; a page the leaderboard cannot answer is sorted."""
        c = self.cluster
        c.start_redis()
        self.port = free_port()
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        n, now = 300, time.time()
        for j, mode in ((60, "max"), (61, "min")):
            cmds = [("HSET", "cgq:job:{%d}" % j, "id", j, "name", "lb-%s" % mode,
                     "state", "running", "suggested", n, "total", n + 50,
                     "objective_metric", "acc", "objective_mode", mode, "created", now,
                     "spec", "name: lb"), ("ZADD", "cgq:jobs", now, j)]
            ranked = []
            for i in range(n):
                state = "failed" if i % 11 == 3 else "succeeded"
                acc = (i * 13) % 7 / 7.0  # 7 values: long runs of ties
                h = ["id", i, "job", j, "state", state, "attempt", 1,
                     "params", json.dumps({"i": i})]
                if state == "succeeded":
                    h += ["metrics", json.dumps({"acc": acc}), "value", repr(acc)]
                    if i % 17 == 5:
                        h += ["feasible", 0]  # infeasible: never ranked
                    else:
                        ranked.append((acc, i))
                        cmds.append(("ZADD", "cgq:job:{%d}:leaderboard" % j, repr(acc), i))
                cmds.append(("HSET", "cgq:job:{%d}:trial:%d" % (j, i)) + tuple(h))
            c.redis.pipeline(cmds)
            sign = -1 if mode == "max" else 1
            want = [i for _, i in sorted(ranked, key=lambda vi: (sign * vi[0], vi[1]))]
            rset = set(want)
            want += [i for i in range(n) if i not in rset]
            for offset, limit in ((0, 1), (0, 10), (5, 7), (40, 25), (len(ranked) - 3, 3),
                                  (len(ranked) - 2, 5), (n - 4, 10)):
                doc = self.get_json("/api/jobs/%d/trials?offset=%d&limit=%d" % (j, offset, limit))
                self.assertEqual([t["id"] for t in doc["trials"]], want[offset:offset + limit],
                                 "%s, offset %d limit %d" % (mode, offset, limit))
                self.assertEqual(doc["total"], n)
            self.assertEqual([t["id"] for t in self.all_pages(j, 9)], want, mode)

    def test_standby_serves_the_same(self):
        c = self.cluster
        c.start_redis()
        self.port = free_port()
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        c.start_worker("w1", cpus=2)
        c.write_file("t.py", TRIAL)
        done = c.submit(c.write_file("done.yaml", DONE))
        c.wait_job(done, timeout=90)
        leader_port = self.port
        self.port = free_port()
        argv = [binary("cgq-coordinator"), "--redis", c.redis_url, "--bind",
                "tcp://127.0.0.1:0", "--control", "tcp://127.0.0.1:0", "--http",
                "127.0.0.1:%d" % self.port]
        standby = Proc("standby", argv, c.logdir, capture_stdout=True)
        c.procs.append(standby)
        line = standby.wait_first_line(30)
        self.assertTrue(line and line.startswith("cgq-coordinator standby"), line)
        for path in ("/api/jobs", "/api/jobs/%d" % done, "/api/jobs/%d/trials?limit=500" % done,
                     "/api/nodes"):
            mine = self.get_json(path)
            self.port, theirs = leader_port, None
            try:
                theirs = self.get_json(path)
            finally:
                self.port = int(argv[-1].rsplit(":", 1)[1])
            for doc in (mine, theirs):  # a running clock: the duration of running jobs
                for j in doc.get("jobs", [doc]):
                    j.pop("duration", None)
            self.assertEqual(mine, theirs, path)
        status, _, body = request(self.port, "/metrics")
        self.assertIn("cgq_coordinator_leader 0\n", body)

    def test_redis_down(self):
        # Redis stops: the API says so (503, JSON), the pages and /metrics
        # still answer; Redis back: the API reads again, same connection pool.
        c = self.cluster
        c.start_redis(appendonly=True)
        self.port = free_port()
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        c.start_worker("w1", cpus=2)
        c.write_file("t.py", TRIAL)
        done = c.submit(c.write_file("done.yaml", DONE))
        c.wait_job(done, timeout=90)
        self.assertEqual(self.get_json("/api/jobs")["total"], 1)
        c.stop_redis()
        for path in ("/api/jobs", "/api/jobs/%d/trials" % done, "/api/nodes"):
            doc = self.get_json(path, want=503)
            self.assertIn("Redis", doc["error"], path)
        self.assertEqual(request(self.port, "/")[0], 200)
        status, _, body = request(self.port, "/metrics")
        self.assertEqual(status, 200, body)
        c.restart_redis()
        c.wait_value(lambda: request(self.port, "/api/jobs")[0], lambda s: s == 200, 20,
                     "the API to read Redis again")
        # Every HTTP thread had a connection Redis closed: each reconnects
        # and reads again, none answers 503 for it.
        for _ in range(16):
            self.get_json("/api/jobs")
        self.assertEqual(len(self.all_pages(done, 7)), 20)

    def test_front_and_devices(self):
        c = self.cluster
        c.start_redis()
        self.port = free_port()
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        c.start_worker("w1", cpus=2)
        c.write_file("two.py", TWO)
        j = c.submit(c.write_file("two.yaml", TWO_SPEC))
        c.wait_job(j, timeout=90)
        res = self.results(j)
        front = self.get_json("/api/jobs/%d/front" % j)
        self.assertEqual(sorted(m["trial"] for m in front["front"]), sorted(res["front"]))
        self.assertEqual([m["trial"] for m in front["front"]],
                         sorted(m["trial"] for m in front["front"]), "by id")
        trials = {t["id"]: t for t in res["trials"]}
        for m in front["front"]:
            self.assertEqual(m["values"], {k: trials[m["trial"]]["metrics"][k] for k in "xy"})
        # An unknown job is 404.
        self.assertEqual(self.get_json("/api/jobs/999/front", want=404)["error"], "no job 999")

        # Devices, as the coordinator writes them (hand-written here): an
        # error string with HTML comes back as the same string.
        c.redis.pipeline([
            ("SADD", "cgq:devices", "board-2", "board-1"),
            ("HSET", "cgq:device:board-1", "id", "board-1", "node", "r1", "state", "quarantined",
             "tags", '{"device": "pi"}', "task", "", "failures", 3, "quarantined", 1,
             "last_error", XSS, "updated", 1700000000.5),
            ("HSET", "cgq:device:board-2", "id", "board-2", "node", "", "state", "offline",
             "tags", "not json", "failures", 0, "quarantined", 0),
        ])
        devs = self.get_json("/api/devices")["devices"]
        self.assertEqual([d["id"] for d in devs], ["board-1", "board-2"])
        self.assertEqual(devs[0]["last_error"], XSS)
        self.assertEqual((devs[0]["quarantined"], devs[0]["failures"], devs[0]["tags"]),
                         (True, 3, {"device": "pi"}))
        self.assertEqual((devs[1]["node"], devs[1]["tags"], devs[1]["updated"]), (None, {}, None))

    def test_token(self):
        c = self.cluster
        c.start_redis()
        token = "s3cret-Token_0123456789abcdef"
        tf = c.write_file("token", token + "\n", mode=0o600)
        base = [binary("cgq-coordinator"), "--redis", c.redis_url, "--bind",
                "tcp://127.0.0.1:0", "--control", "tcp://127.0.0.1:0"]
        # Beyond loopback without a token: refused before binding, saying how.
        r = subprocess.run(base + ["--http", "0.0.0.0:%d" % free_port()], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--http-token-file", r.stderr)
        # A token too short, a missing file: refused.
        short = c.write_file("short", "abc\n")
        for f in (short, os.path.join(self.tmp, "absent")):
            r = subprocess.run(base + ["--http", "127.0.0.1:0", "--http-token-file", f],
                               capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("--http-token-file", r.stderr)

        self.port = free_port()
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port, "--http-token-file",
                                   tf))
        for path in ("/", "/api/jobs", "/metrics", "/static/app.js", "/api/nodes",
                     "/static/charts.js", "/api/events", "/api/events?job=1",
                     "/api/jobs/1/progress", "/api/jobs/1/importance"):
            status, headers, _ = request(self.port, path)
            self.assertEqual(status, 401, path)
            self.assertIn("Bearer", headers.get("www-authenticate", ""))
        for bad in ("Bearer " + token[:-1], "Bearer " + token + "x", "Basic " + token,
                    "Bearer "):
            self.assertEqual(request(self.port, "/api/jobs", {"Authorization": bad})[0], 401,
                             bad)
        self.assertEqual(request(self.port, "/api/jobs?token=wrong")[0], 401)
        auth = {"Authorization": "Bearer " + token}
        self.assertEqual(self.get_json("/api/jobs", headers=auth)["total"], 0)
        status, _, body = request(self.port, "/metrics", auth)
        self.assertEqual(status, 200, body)
        # ?token= once: a cookie, HttpOnly, that then is enough.
        status, headers, _ = request(self.port, "/?token=" + token)
        self.assertEqual(status, 200)
        cookie = headers.get("set-cookie", "")
        self.assertIn("HttpOnly", cookie)
        self.assertIn("SameSite=Strict", cookie)
        self.assertEqual(request(self.port, "/api/jobs",
                                 {"Cookie": cookie.split(";")[0]})[0], 200)
        self.assertEqual(request(self.port, "/api/jobs", {"Cookie": "cgq_token=nope"})[0], 401)
        # The event stream with the token: its head (200, an event stream).
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        try:
            sock.sendall(("GET /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s"
                          "\r\n\r\n" % token).encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                head += chunk
            self.assertTrue(head.startswith(b"HTTP/1.1 200"), head[:200])
            self.assertIn(b"text/event-stream", head)
        finally:
            sock.close()


if __name__ == "__main__":
    main()
