#!/usr/bin/env python3
"""A spec's notify: {url, on}: the coordinator POSTs a JSON summary when the
job ends, once per event, retrying after a 500; finished, failed and
cancelled each reach the receiver with the right summary, an event not asked
for sends nothing; a notification pending when the coordinator is killed is
delivered by the next one; and a receiver that never answers (or a dead
port) does not stall the loop: another job's trials keep dispatching."""

import http.server
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, free_port, main, open_files_at_least  # noqa: E402

SCRIPT = r'''
import json, os, sys
i = int(sys.argv[1])
if sys.argv[2] == "fail":
    sys.exit(1)
os.write(3, (json.dumps({"v": i * 10}) + "\n").encode())
'''


def spec(name, url, on, mode="ok", n=3, gpu=False):
    cmd = "python3 {spec_dir}/t.py {i} %s" % mode
    return '''name: %s
space:
  i: {grid: [%s]}
objective: {metric: v, mode: max}
notify: {url: "%s", on: [%s]}
trial:
  command: %s
  resources: {cpu: 1%s}
''' % (name, ", ".join(str(i) for i in range(n)), url, ", ".join(on), cmd,
       ", gpu: 1" if gpu else "")


class Receiver:
    """A loopback HTTP server that records every POST; it answers 500 to the
    first `fail_first` POSTs (or to all while failing is set), 200 after."""

    def __init__(self, fail_first=1, delay=0.0):
        self.posts = []  # (status answered, headers dict, body dict)
        self.lock = threading.Lock()
        self.fail_first = fail_first
        self.failing = False
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                time.sleep(delay)  # a receiver some way off
                with owner.lock:
                    status = 500 if owner.failing or len(owner.posts) < owner.fail_first else 200
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        body = {"_unparsable": raw.decode("utf-8", "replace")}
                    owner.posts.append((status, dict(self.headers), body, self.path))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/hook" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def delivered(self, nid):
        with self.lock:
            return [p for p in self.posts if p[2].get("notification") == nid and p[0] == 200]

    def all_for(self, nid):
        with self.lock:
            return [p for p in self.posts if p[2].get("notification") == nid]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class NotifyTest(CgqTestCase):
    def setUp(self):
        super().setUp()
        self.closers = []

    def tearDown(self):
        for f in self.closers:
            f()
        super().tearDown()

    def receiver(self, **kw):
        r = Receiver(**kw)
        self.closers.append(r.close)
        return r

    def check_summary(self, body, j, event):
        c = self.cluster
        job = c.job(j)
        self.assertEqual(body["notification"], "%d:%s" % (j, event))
        self.assertEqual(body["event"], event)
        self.assertEqual(body["job"], j)
        self.assertEqual(body["name"], job["name"])
        self.assertEqual(body["state"], job["state"])
        states = ("pending", "running", "succeeded", "failed", "stopped", "cancelled",
                  "unschedulable", "stale", "paused")
        self.assertEqual(body["counts"], {s: int(job[s]) for s in states}, job)
        self.assertEqual(body["total"], sum(int(job[s]) for s in states))
        if job.get("best_trial"):
            self.assertEqual(body["best"]["trial"], int(job["best_trial"]))
            self.assertAlmostEqual(body["best"]["value"], float(job["best_value"]))
            self.assertEqual((body["best"]["metric"], body["best"]["mode"]), ("v", "max"))
        else:
            self.assertIsNone(body["best"])
        self.assertAlmostEqual(body["created"], float(job["created"]), places=3)
        self.assertGreaterEqual(body["duration_s"], 0)
        self.assertAlmostEqual(body["duration_s"], body["ended"] - body["created"], places=3)

    def test_prompt_past_descriptor_1024(self):
        """A coordinator of thousands of nodes holds descriptors past 1024,
        where select()'s fd_set ends: curl's sockets are polled all the same
        (its socket interface, not curl_multi_fdset, which leaves them out),
        so a quiet coordinator (no node, nothing else to wake it) takes a
        receiver's answer when it comes, not at a once-a-second timer."""
        if not open_files_at_least(self, 1300):  # 1,100 sockets here
            return
        c = self.start_default(workers=())
        c.write_file("t.py", SCRIPT)
        rx = self.receiver(fail_first=0, delay=0.3)
        host, port = c.nodes_ep[len("tcp://"):].rsplit(":", 1)
        idle = []
        self.closers.append(lambda: [s.close() for s in idle])
        for _ in range(1100):  # accepted, waiting for a greeting
            idle.append(socket.create_connection((host, int(port)), timeout=5))
        c.wait_for(lambda: len(os.listdir("/proc/%d/fd" % c.coordinator.pid)) > 1100, 20,
                   "the coordinator to accept 1100 connections")
        took = []
        for k in range(3):
            j = c.submit(c.write_file("hi%d.yaml" % k,
                                      spec("notify-high-fd", rx.url, ["cancelled"])))
            nid = "%d:cancelled" % j
            t0 = time.time()
            r = c.cgq("cancel", j)
            self.assertEqual(r.returncode, 0, r.stderr)
            c.wait_for(lambda: rx.delivered(nid), 30, "the notification")
            # Its record goes once the coordinator has the 200.
            c.wait_for(lambda: nid not in c.redis.hgetall("cgq:notify"), 30,
                       "the record to be cleared", interval=0.01)
            took.append(time.time() - t0)
        took.sort()
        # 0.31 s here; 0.56-0.60 when curl's sockets past 1024 went unpolled.
        self.assertLess(took[1], 0.45, "cancel to the receiver's answer taken, 0.3 s of it the "
                        "receiver's: %s s" % ["%.2f" % t for t in took])

    def test_each_event_once_after_a_500(self):
        c = self.start_default(workers=(("w1", 2),))
        c.write_file("t.py", SCRIPT)
        rx = self.receiver(fail_first=1)
        all_events = ("finished", "failed", "cancelled")

        ok = c.submit(c.write_file("ok.yaml", spec("notify-ok", rx.url, all_events)))
        c.wait_job(ok, 60)
        nid = "%d:finished" % ok
        c.wait_for(lambda: rx.delivered(nid), 20, "the finished notification to be delivered")
        posts = rx.all_for(nid)
        self.assertEqual([p[0] for p in posts], [500, 200],
                         "one 500, then one retry that got 200: %s" % posts)
        self.assertEqual(posts[0][2], posts[1][2], "the retry sends the same summary")
        status, headers, body, path = posts[1]
        self.assertEqual(path, "/hook")
        self.assertEqual(headers.get("Content-Type"), "application/json")
        self.assertEqual(headers.get("X-Cgq-Notification"), nid)
        self.check_summary(body, ok, "finished")
        self.assertEqual(body["counts"]["succeeded"], 3)
        self.assertEqual(body["best"]["trial"], 2)
        self.assertEqual(body["best"]["value"], 20)

        bad = c.submit(c.write_file("bad.yaml", spec("notify-bad", rx.url, all_events,
                                                    mode="fail", n=2)))
        c.wait_job(bad, 60)
        c.wait_for(lambda: rx.delivered("%d:failed" % bad), 20, "the failed notification")
        self.check_summary(rx.delivered("%d:failed" % bad)[0][2], bad, "failed")

        gpu = c.submit(c.write_file("gpu.yaml", spec("notify-gpu", rx.url, all_events, gpu=True)))
        c.wait_value(lambda: c.job(gpu), lambda h: h.get("blocked"), 20, "the gpu job to block")
        r = c.cgq("cancel", gpu)
        self.assertEqual(r.returncode, 0, r.stderr)
        c.wait_for(lambda: rx.delivered("%d:cancelled" % gpu), 20, "the cancelled notification")
        self.check_summary(rx.delivered("%d:cancelled" % gpu)[0][2], gpu, "cancelled")

        # Not asked for: a finished job whose spec wants failures only.
        quiet = c.submit(c.write_file("quiet.yaml", spec("notify-quiet", rx.url, ["failed"])))
        c.wait_job(quiet, 60)

        # Nothing more arrives: no duplicate, nothing for the quiet job, and
        # no record is left in Redis.
        time.sleep(2.5)
        with rx.lock:
            ids = sorted(p[2].get("notification") for p in rx.posts if p[0] == 200)
        self.assertEqual(ids, sorted(["%d:finished" % ok, "%d:failed" % bad,
                                      "%d:cancelled" % gpu]), rx.posts)
        self.assertEqual(len(rx.posts), 4, "4 POSTs in all (one retried): %s" % rx.posts)
        self.assertEqual(c.redis.hgetall("cgq:notify"), {})

    def test_pending_notification_survives_a_restart(self):
        c = self.start_default(workers=(("w1", 2),))
        c.write_file("t.py", SCRIPT)
        rx = self.receiver(fail_first=0)
        rx.failing = True
        j = c.submit(c.write_file("r.yaml", spec("notify-restart", rx.url, ["finished"])))
        c.wait_job(j, 60)
        nid = "%d:finished" % j
        c.wait_for(lambda: rx.all_for(nid), 20, "the first POST")
        self.assertIn(nid, c.redis.hgetall("cgq:notify"), "the record waits in Redis")
        nodes_port = int(c.nodes_ep.rsplit(":", 1)[1])
        control_port = int(c.control_ep.rsplit(":", 1)[1])
        c.coordinator.kill9()
        rx.failing = False
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % nodes_port,
                                   "--control", "tcp://127.0.0.1:%d" % control_port))
        c.wait_for(lambda: rx.delivered(nid), 20, "the restarted coordinator to deliver it")
        c.wait_for(lambda: c.redis.hgetall("cgq:notify") == {}, 10, "the record to be cleared")
        time.sleep(1.5)
        self.assertEqual(len(rx.delivered(nid)), 1, rx.all_for(nid))
        self.check_summary(rx.delivered(nid)[0][2], j, "finished")

    def test_silent_receiver_does_not_stall_the_loop(self):
        c = self.start_default(workers=(("w1", 2),))
        c.write_file("t.py", SCRIPT)
        # Accepts connections (the kernel's backlog) and never answers.
        hole = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        hole.bind(("127.0.0.1", 0))
        hole.listen(16)
        self.closers.append(hole.close)
        dead = "http://127.0.0.1:%d/x" % free_port()
        silent = "http://127.0.0.1:%d/x" % hole.getsockname()[1]
        a = c.submit(c.write_file("a.yaml", spec("to-silent", silent, ["finished"], n=1)))
        b = c.submit(c.write_file("b.yaml", spec("to-dead", dead, ["finished"], n=1)))
        c.wait_job(a, 60)
        c.wait_job(b, 60)
        t0 = time.monotonic()
        many = c.submit(c.write_file("m.yaml", spec("many", silent, ["failed"], n=30)))
        job = c.wait_job(many, 60)
        took = time.monotonic() - t0
        self.assertEqual(job.get("succeeded"), "30", job)
        pending = c.redis.hgetall("cgq:notify")
        self.assertIn("%d:finished" % a, pending,
                      "the silent receiver's POST was still in flight the whole time")
        self.assertIn("%d:finished" % b, pending, "the dead port is still being retried")
        self.assertLess(took, 9, "30 short trials took %.1fs next to a hung POST" % took)


if __name__ == "__main__":
    main()
