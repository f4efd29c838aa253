#!/usr/bin/env python3
"""The dashboard in a real browser: Debian's headless Chromium against a
real cluster. With --dump-dom (the DOM after the page's scripts ran): the
jobs page lists the jobs Redis holds, with links; a job page shows its
counts and its trials, a param value holding HTML as text (no <img>
element made); a trial page shows its params (as text), metrics and
error; the nodes page lists the worker and a device (its HTML error as
text). Over the DevTools protocol: a trial that
finishes while the page is open shows up within 3 s without a reload,
through the job's event stream (/api/events);
clicking a column header sorts the leaderboard and the state menu filters
it (both on the server); no script
error, console error or dialog (alert) happens. The DevTools protocol
runs over a websocket client of the standard library's (below).

Skipped, saying why, when chromium is not installed: scripts/bootstrap
installs it."""

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, SPEED, CgqTestCase, free_port, main, tail  # noqa: E402



class WebSocket:
    """The client side of RFC 6455, enough for the DevTools protocol: text
    frames, masked as a client must, fragments joined, pings answered
    (Python's standard library only, so the test runs under any python3)."""

    def __init__(self, url, timeout):
        m = re.match(r"ws://([^/:]+):(\d+)(/.*)", url)
        self.sock = socket.create_connection((m.group(1), int(m.group(2))), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n"
                           % (m.group(3), m.group(1), m.group(2), key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise AssertionError("DevTools closed the websocket handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        want = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        if not head.startswith(b"HTTP/1.1 101") or want.encode() not in head:
            raise AssertionError("websocket handshake refused: %r" % head[:300])

    def _send_frame(self, opcode, data):
        n = len(data)
        hdr = bytes([0x80 | opcode])
        if n < 126:
            hdr += bytes([0x80 | n])
        elif n < 65536:
            hdr += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            hdr += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def send(self, text):
        self._send_frame(0x1, text.encode())

    def _exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError("DevTools closed the websocket")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        parts = []
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            mask = self._exact(4) if b1 & 0x80 else None
            data = self._exact(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            opcode = b0 & 0x0F
            if opcode == 0x9:  # ping
                self._send_frame(0xA, data)
                continue
            if opcode == 0x8:
                raise AssertionError("DevTools closed the websocket")
            if opcode in (0x0, 0x1, 0x2):
                parts.append(data)
                if b0 & 0x80:
                    return b"".join(parts).decode("utf-8", "replace")

    def close(self):
        try:
            self._send_frame(0x8, b"")
        except OSError:
            pass
        self.sock.close()

XSS = "<img src=x onerror=alert(1)>"

TRIAL = r'''
import json, os, sys
i = int(sys.argv[1])
if i == 3:
    sys.exit(3)
os.write(3, (json.dumps({"v": i * 10}) + "\n").encode())
'''

DONE = '''name: browser-done
space:
  i: {grid: [0, 1, 2, 3]}
  s: {grid: ["%s"]}
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/t.py {i}
  resources: {cpu: 1}
''' % XSS

# Waits for its gate file, then reports.
GATED = r'''
import json, os, sys, time
gate, i = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 120
while not os.path.exists(gate + str(i)) and time.time() < deadline:
    time.sleep(0.05)
os.write(3, (json.dumps({"v": i}) + "\n").encode())
'''

LIVE = '''name: browser-live
space:
  i: {grid: [0, 1]}
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/gated.py {spec_dir}/gate {i}
  resources: {cpu: 1}
'''


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def kill_group(pgid):
    """SIGKILL the process group we started, and wait until it is gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        for name in os.listdir("/proc"):  # reap our own zombies of that group
            if name.isdigit():
                try:
                    if os.getpgid(int(name)) == pgid:
                        os.waitpid(int(name), os.WNOHANG)
                except (ProcessLookupError, ChildProcessError, PermissionError):
                    pass
        time.sleep(0.05)


BASE_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--disable-extensions", "--disable-background-networking",
              "--disable-dev-shm-usage", "--mute-audio"]


def dump_dom(tmp, url):
    """The DOM of url once its scripts have run (5 s of virtual time)."""
    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp)
    p = subprocess.Popen([chromium()] + BASE_FLAGS + ["--user-data-dir=" + profile,
                                                      "--virtual-time-budget=5000",
                                                      "--dump-dom", url],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = p.communicate(timeout=60 * SPEED)
    except subprocess.TimeoutExpired:
        kill_group(p.pid)
        p.communicate()
        raise AssertionError("chromium --dump-dom %s did not finish in 60s" % url)
    kill_group(p.pid)
    if p.returncode != 0 or not out:
        raise AssertionError("chromium --dump-dom %s: exit %d\n%s" % (url, p.returncode,
                                                                      err.decode()[-3000:]))
    return out.decode("utf-8", "replace")


class Browser:
    """Headless Chromium driven over the DevTools protocol (one page)."""

    def __init__(self, tmp):
        self.profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp)
        self.err_path = os.path.join(tmp, "chromium.stderr.log")
        self.err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(
            [chromium()] + BASE_FLAGS + ["--user-data-dir=" + self.profile,
                                         "--remote-debugging-port=0",
                                         "--remote-allow-origins=*", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.err,
            start_new_session=True)
        self.ws = None
        self.next_id = 0
        self.events = []
        try:
            self._connect()
        except BaseException:
            self.close()
            raise

    def _connect(self):
        deadline = time.monotonic() + 30 * SPEED
        port = None
        while port is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError("chromium printed no DevTools address:\n" +
                                     tail(self.err_path))
            m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/",
                          open(self.err_path, errors="replace").read())
            if m:
                port = int(m.group(1))
            time.sleep(0.05)
        with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=10) as r:
            targets = json.load(r)
        page = [t for t in targets if t.get("type") == "page"][0]
        self.ws = WebSocket(page["webSocketDebuggerUrl"], timeout=30)
        for method in ("Page.enable", "Runtime.enable", "Log.enable"):
            self.call(method)

    def call(self, method, **params):
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise AssertionError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == "Page.javascriptDialogOpening":
                    # Never leave a dialog open (it would block the page).
                    self.ws.send(json.dumps({"id": 0, "method": "Page.handleJavaScriptDialog",
                                             "params": {"accept": True}}))

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True)
        if "exceptionDetails" in r:
            raise AssertionError("%s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait(self, expr, pred, timeout, what):
        deadline = time.monotonic() + timeout * SPEED
        v = None
        while time.monotonic() < deadline:
            v = self.eval(expr)
            if pred(v):
                return v
            time.sleep(0.1)
        raise AssertionError("%s within %.0fs; last: %r" % (what, timeout * SPEED, v))

    def problems(self):
        """Script errors, console errors and dialogs seen so far."""
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append("exception: %s" % p.get("exceptionDetails"))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.%s: %s" % (p["type"], p.get("args")))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: %s" % p["entry"].get("text"))
            elif m == "Page.javascriptDialogOpening":
                out.append("dialog: %s" % p.get("message"))
        return out

    def close(self):
        if self.ws is not None:
            try:
                self.ws.close()
            except Exception:
                pass
        kill_group(self.proc.pid)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self.err.close()


# A trial that checkpoints twice through the Python helpers (path of
# clients/python given), for the trial page's checkpoint facts.
CKPT_TRIAL = r'''
import os, sys
sys.path.insert(0, %r)
import cgq
for epoch in (1, 2):
    with open(os.path.join(cgq.checkpoint_dir(), "w.txt"), "w") as f:
        f.write(str(epoch))
    cgq.report(epoch=epoch, v=epoch)
    cgq.checkpoint(epoch=epoch)
cgq.result(v=2)
'''

CKPT_SPEC = '''name: browser-ckpt
space:
  i: {grid: [0, 1]}
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/ck.py
  resources: {cpu: 1}
checkpoint: {store: '{spec_dir}/store', keep: 2}
'''

# Whether the page's event stream is open ("events"); null-safe, as the
# page may not have a body yet right after a navigation.
STREAM = "document.body ? document.body.dataset.live || null : null"

ROWS = ("JSON.stringify([...document.querySelectorAll('#trials tbody tr')]"
        ".map(tr => [Number(tr.dataset.trial), tr.className]))")


@unittest.skipIf(chromium() is None,
                 "chromium is not installed (apt-get install chromium; scripts/bootstrap does)")
class DashboardBrowserTest(CgqTestCase):

    def start(self):
        c = self.cluster
        c.start_redis()
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        c.start_coordinator(extra=("--http", "127.0.0.1:%d" % self.port))
        c.start_worker("w1", cpus=2)
        c.write_file("t.py", TRIAL)
        c.write_file("gated.py", GATED)

    def test_pages(self):
        c = self.cluster
        self.start()
        done = c.submit(c.write_file("done.yaml", DONE))
        c.wait_job(done, timeout=60)
        live = c.submit(c.write_file("live.yaml", LIVE))
        c.wait_value(lambda: c.job(live), lambda h: h.get("running") == "2", 30,
                     "both trials of job %d to run" % live)

        dom = dump_dom(self.tmp, self.base + "/?live=0")
        jobs = {int(j) for j in c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1)}
        self.assertEqual(jobs, {done, live})
        for j in jobs:
            self.assertIn('href="/jobs/%d"' % j, dom, "the jobs page links job %d" % j)
            self.assertIn(c.job(j)["name"], dom)
        self.assertIn("finished", dom)
        self.assertIn("running", dom)

        # ?live=0: no event stream, which --dump-dom would wait on forever.
        dom = dump_dom(self.tmp, self.base + "/jobs/%d?live=0" % done)
        self.assertIn("Job %d: browser-done" % done, dom)
        rows = re.findall(r'<tr class="state-(\w+)" data-trial="(\d+)">', dom)
        self.assertEqual(sorted(int(t) for _, t in rows), [0, 1, 2, 3], dom[-3000:])
        # Best first (cgq results' order): 2 (v 20), 1, 0, then the failed 3.
        self.assertEqual([int(t) for _, t in rows], [2, 1, 0, 3])
        self.assertEqual(dict((int(t), s) for s, t in rows)[3], "failed")
        # The HTML param is text: escaped in the DOM, and no <img> element exists.
        self.assertIn("&lt;img src=x onerror=alert(1)&gt;", dom)
        self.assertNotIn("<img", dom)
        # The counts table holds the job hash's counts.
        h = c.job(done)
        heads = re.findall(r"<th>(\w+)</th>", dom.split('id="counts"')[1].split("</table>")[0])
        cells = re.findall(r'<td class="num">(\d+)</td>',
                           dom.split('id="counts"')[1].split("</table>")[0])
        self.assertEqual(dict(zip(heads, map(int, cells)))["succeeded"], int(h["succeeded"]))
        self.assertEqual(dict(zip(heads, map(int, cells)))["failed"], int(h["failed"]))
        self.assertIn('href="/jobs/%d/trials/2"' % done, dom, "trial ids link their pages")
        # Failures grouped by error: the one failed trial, linked.
        fails = dom.split('id="failures"')[1].split("</table>")[0]
        self.assertIn('<td class="num">1</td><td>exit status 3</td>', fails)
        self.assertIn('<a href="/jobs/%d/trials/3">3</a>' % done, fails)

        # A trial page: its params (the HTML one as text), metrics, state.
        dom = dump_dom(self.tmp, self.base + "/jobs/%d/trials/2?live=0" % done)
        self.assertIn("Job %d, trial 2: succeeded" % done, dom)
        self.assertIn("<th>s</th><td>&lt;img src=x onerror=alert(1)&gt;</td>", dom)
        self.assertIn("<th>v</th><td>20</td>", dom)
        self.assertNotIn("<img", dom)
        dom = dump_dom(self.tmp, self.base + "/jobs/%d/trials/3?live=0" % done)
        self.assertIn("exit status 3", dom, "a failed trial's error is shown")

        # The nodes page, and a device (hand-written as the coordinator
        # writes one) whose last error holds HTML: shown as text.
        c.redis.pipeline([
            ("SADD", "cgq:devices", "board-1"),
            ("HSET", "cgq:device:board-1", "id", "board-1", "node", "", "state", "quarantined",
             "tags", '{"device": "pi"}', "failures", 3, "quarantined", 1, "last_error", XSS)])
        dom = dump_dom(self.tmp, self.base + "/nodes?live=0")
        self.assertIn('data-node="w1"', dom)
        self.assertIn("alive", dom)
        self.assertIn('<tr class="state-quarantined" data-device="board-1">', dom)
        self.assertIn("<td>device=pi</td>", dom)
        self.assertIn("<td>&lt;img src=x onerror=alert(1)&gt;</td>", dom)
        self.assertNotIn("<img", dom)
        r = c.cgq("cancel", str(live))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_trial_checkpoint_and_lineage(self):
        """A trial page shows the trial's latest checkpoint (as the API
        gives it from the trial hash) and pbt's lineage, linked, its
        params' names as text."""
        c = self.cluster
        self.start()
        c.write_file("ck.py", CKPT_TRIAL % os.path.join(REPO, "clients", "python"))
        j = c.submit(c.write_file("ck.yaml", CKPT_SPEC))
        job = c.wait_job(j, timeout=60)
        self.assertEqual(job.get("state"), "finished", job)
        rec = json.loads(c.trial(j, 0)["checkpoint"])
        with urllib.request.urlopen(self.base + "/api/jobs/%d/trials/0" % j, timeout=10) as r:
            api = json.loads(r.read())
        self.assertEqual(api["checkpoint"], rec)
        self.assertEqual(api["checkpoints"], len(json.loads(c.trial(j, 0)["checkpoints"])))
        self.assertEqual((api["lineage"], api["exploited"], api["paused"]), (None, None, None))
        dom = dump_dom(self.tmp, self.base + "/jobs/%d/trials/0?live=0" % j)
        facts = dom.split('id="facts"')[1].split("</dl>")[0]
        self.assertIn("<dt>checkpoint</dt>", facts)
        self.assertIn("epoch 2", facts)
        self.assertIn("sha256 " + rec["sha256"][:12], facts)
        # pbt's fields, written as the coordinator writes them, with HTML in
        # a param's name: a link to the parent and to the child, text only.
        c.redis.pipeline([("HSET", "cgq:job:{%d}:trial:1" % j, "lineage", json.dumps(
            {"parent": 0, "replaces": 0, "step": 2, "changed": {XSS: [0.1, 0.12]}})),
            ("HSET", "cgq:job:{%d}:trial:0" % j, "exploited",
             json.dumps({"by": 1, "donor": 0, "step": 2}))])
        dom = dump_dom(self.tmp, self.base + "/jobs/%d/trials/1?live=0" % j)
        self.assertIn('<a href="/jobs/%d/trials/0" id="lineage-parent">trial 0 at step 2</a>' % j,
                      dom)
        self.assertIn("<dd>&lt;img src=x onerror=alert(1)&gt; 0.1 \u2192 0.12</dd>", dom)
        self.assertNotIn("<img", dom)
        dom = dump_dom(self.tmp, self.base + "/jobs/%d/trials/0?live=0" % j)
        self.assertIn('<a href="/jobs/%d/trials/1" id="lineage-child">trial 1</a>' % j, dom)

    def test_live_and_sort(self):
        c = self.cluster
        self.start()
        done = c.submit(c.write_file("done.yaml", DONE))
        c.wait_job(done, timeout=60)
        live = c.submit(c.write_file("live.yaml", LIVE))
        c.wait_value(lambda: c.job(live), lambda h: h.get("running") == "2", 30,
                     "both trials of job %d to run" % live)
        b = Browser(self.tmp)
        try:
            b.call("Page.navigate", url=self.base + "/jobs/%d" % live)
            b.wait(ROWS, lambda v: v and json.loads(v) == [[0, "state-running"],
                                                            [1, "state-running"]],
                   15, "the page to show both trials running")
            # The page listens to the job's event stream (/api/events); while
            # it is open the poll backs off to 10 s, so the 3 s below is
            # the event's doing.
            b.wait(STREAM, lambda v: v == "events", 5,
                   "the page's event stream to open")
            # Trial 1 finishes while the page is open.
            open(os.path.join(c.specdir, "gate1"), "w").close()
            c.wait_value(lambda: c.trial(live, 1), lambda h: h.get("state") == "succeeded", 30,
                         "trial 1 to succeed")
            seen = time.monotonic()
            b.wait(ROWS, lambda v: [1, "state-succeeded"] in json.loads(v), 3,
                   "the page to show trial 1 succeeded (polling, no reload)")
            self.assertLess(time.monotonic() - seen, 3 * SPEED)
            self.assertTrue(b.eval("document.body.dataset.lastEvent"), "an event came")
            # One of two done: the page guesses the time left.
            b.wait("document.getElementById('facts').textContent",
                   lambda v: "ETAabout " in v, 5, "an ETA once a trial is done")
            # A trial page listens too: trial 0 ends while it is open,
            # shown within 3 s, and the page then closes its stream.
            b.call("Page.navigate", url=self.base + "/jobs/%d/trials/0" % live)
            b.wait(STREAM, lambda v: v == "events", 10,
                   "the trial page's event stream to open")
            b.wait("document.getElementById('title').textContent",
                   lambda v: v.endswith(": running"), 5, "the trial page to show it running")
            open(os.path.join(c.specdir, "gate0"), "w").close()
            c.wait_value(lambda: c.trial(live, 0), lambda h: h.get("state") == "succeeded", 30,
                         "trial 0 to succeed")
            b.wait("document.getElementById('title').textContent",
                   lambda v: v.endswith(": succeeded"), 3, "the trial page to show it ended")
            b.wait(STREAM, lambda v: v == "ended", 3,
                   "the trial page to close its stream")
            c.wait_job(live, timeout=30)

            # The jobs page listens to every job's events: a job submitted
            # while it is open shows, then finished (its gates are open),
            # each within 3 s.
            b.call("Page.navigate", url=self.base + "/")
            b.wait(STREAM, lambda v: v == "events", 10,
                   "the jobs page's event stream to open")
            jobs_rows = ("[...document.querySelectorAll('#jobs tbody tr')]"
                         ".map(tr => tr.textContent)")
            again = c.submit(c.write_file("again.yaml", LIVE.replace("browser-live",
                                                                     "browser-again")))
            seen = time.monotonic()
            c.wait_job(again, timeout=30)
            b.wait(jobs_rows, lambda v: any(r.startswith(str(again) + "browser-againfinished")
                                            for r in v),
                   3 + (time.monotonic() - seen), "job %d on the jobs page, finished" % again)

            # The finished job: click the "s"... the i column sorts by i, on the server.
            b.call("Page.navigate", url=self.base + "/jobs/%d" % done)
            b.wait(ROWS, lambda v: v and [t for t, _ in json.loads(v)] == [2, 1, 0, 3], 15,
                   "the leaderboard, best first")
            b.eval("document.querySelector('th[data-sort=\"params.i\"]').click()")
            b.wait(ROWS, lambda v: [t for t, _ in json.loads(v)] == [0, 1, 2, 3], 5,
                   "the rows sorted by i after a click")
            b.eval("document.querySelector('th[data-sort=\"params.i\"]').click()")
            b.wait(ROWS, lambda v: [t for t, _ in json.loads(v)] == [3, 2, 1, 0], 5,
                   "the rows sorted by i, descending, after a second click")
            self.assertEqual(
                b.eval("document.querySelector('th[data-sort=\"params.i\"]').className"),
                "sorted-desc")
            # The state filter: only the failed trial, from the server.
            b.eval("const s = document.getElementById('state'); s.value = 'failed';"
                   "s.dispatchEvent(new Event('change'))")
            b.wait(ROWS, lambda v: json.loads(v) == [[3, "state-failed"]], 5,
                   "only the failed trial after choosing state failed")
            b.eval("const s2 = document.getElementById('state'); s2.value = '';"
                   "s2.dispatchEvent(new Event('change'))")
            b.wait(ROWS, lambda v: len(json.loads(v)) == 4, 5, "every trial again")
            # The XSS value: text in its cells, no <img> anywhere, no alert.
            cells = b.eval("[...document.querySelectorAll('#trials td')]"
                           ".filter(td => td.textContent === %s).length" % json.dumps(XSS))
            self.assertEqual(cells, 4)
            self.assertEqual(b.eval("document.getElementsByTagName('img').length"), 0)
            time.sleep(0.5)
            b.eval("1")  # drain the events that came meanwhile
            self.assertEqual(b.problems(), [])
        finally:
            b.close()


if __name__ == "__main__":
    main()
