#!/usr/bin/env python3
"""A network cut longer than the heartbeat timeout, between a worker and the
coordinator, in network namespaces this test creates (root only; skipped
with the reason elsewhere).

The test process moves itself into namespace A (its own loopback): Redis,
the coordinator and worker w1 live there. Worker w2 lives in namespace B,
joined to A by a veth pair (10.203.x.1 <-> 10.203.x.2, both ends inside the
test's namespaces). Mid-job B's end goes down for 3 s, five times the
heartbeat timeout: the coordinator declares w2 dead and runs its trials on
w1; w2's trials go on and finish. When the link is back, w2 reports them:
first outcome wins. Every trial ends exactly once in the records, the
counts, the events and the leaderboard."""

import ctypes
import os
import random
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402
from harness import CgqTestCase, Proc, binary, main, tail  # noqa: E402

CLONE_NEWNET = 0x40000000
TAG = "%d%d" % (os.getpid() % 10000, random.randrange(100))
NS_A, NS_B = "cgqa%s" % TAG, "cgqb%s" % TAG
VETH_A, VETH_B = "cgqva%s" % TAG, "cgqvb%s" % TAG
NET = 10 + int(TAG) % 200
ADDR_A, ADDR_B = "10.203.%d.1" % NET, "10.203.%d.2" % NET


def ip(*args, check=True):
    return subprocess.run(["ip"] + list(args), capture_output=True, text=True, check=check)


def setup_namespaces():
    """Returns None, or why the test cannot run here."""
    if os.geteuid() != 0:
        return "needs root (network namespaces); CI runs it as root"
    try:
        ip("netns", "add", NS_A)
    except (OSError, subprocess.CalledProcessError) as e:
        return "cannot create a network namespace: %s" % getattr(e, "stderr", e)
    try:
        ip("netns", "add", NS_B)
        ip("link", "add", VETH_A, "type", "veth", "peer", "name", VETH_B)
        ip("link", "set", VETH_A, "netns", NS_A)
        ip("link", "set", VETH_B, "netns", NS_B)
        for ns, dev, addr in ((NS_A, VETH_A, ADDR_A), (NS_B, VETH_B, ADDR_B)):
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "addr", "add", addr + "/30", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open("/var/run/netns/" + NS_A, os.O_RDONLY)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            return "setns: %s" % os.strerror(ctypes.get_errno())
        os.close(fd)
    except (OSError, subprocess.CalledProcessError) as e:
        teardown_namespaces()
        return "cannot set up the namespaces: %s" % getattr(e, "stderr", e)
    return None


def teardown_namespaces():
    for ns in (NS_A, NS_B):
        ip("netns", "del", ns, check=False)  # takes the veth pair with it



N = 12

SKIP = None


class NetCutTest(CgqTestCase):
    def setUp(self):
        if SKIP:
            raise unittest.SkipTest(SKIP)
        super().setUp()

    def test_cut_longer_than_the_heartbeat_timeout(self):
        c = self.cluster
        c.start_redis()
        port = harness.free_port()
        argv = [binary("cgq-coordinator"), "--redis", c.redis_url, "--bind",
                "tcp://0.0.0.0:%d" % port, "--control", "tcp://127.0.0.1:0", "--heartbeat",
                "200ms", "--insecure"]
        coord = Proc("coordinator", argv, c.logdir, capture_stdout=True)
        c.procs.append(coord)
        c.coordinator = coord
        line = coord.wait_first_line(30)
        m = harness.READY_RE.match(line or "")
        self.assertTrue(m, "ready line %r:\n%s" % (line, tail(coord.err_path)))
        c.control_ep = m.group(2)
        c.nodes_ep = "tcp://127.0.0.1:%d" % port
        c.start_worker("w1", cpus=2)
        # w2 in namespace B, through the veth pair.
        c.nodes_ep = "tcp://%s:%d" % (ADDR_A, port)
        wd = os.path.join(c.tmp, "w2")
        w2 = Proc("worker-w2", ["ip", "netns", "exec", NS_B, binary("cgq-worker"), "--coordinator",
                                c.nodes_ep, "--id", "w2", "--cpus", "2", "--gpus", "none",
                                "--workdir", wd, "--kill-grace", "1s"], c.logdir)
        c.procs.append(w2)
        c.workers["w2"] = w2
        c.wait_for(lambda: c.redis.hgetall("cgq:node:w2").get("state") == "alive", 20,
                   "w2 (namespace B) to join")
        j = c.submit(c.write_counted_job("netcut", N, 1.5))
        c.wait_value(lambda: sum(1 for h in c.trials(j).values() if h.get("node") == "w2"
                                 and h.get("state") == "running"),
                     lambda n: n == 2, 30, "w2 to run 2 trials")
        ip("-n", NS_B, "link", "set", VETH_B, "down")
        try:
            c.wait_for(lambda: c.redis.hgetall("cgq:node:w2").get("state") == "dead", 20,
                       "w2 to be declared dead behind the cut")
            time.sleep(2.0)
        finally:
            ip("-n", NS_B, "link", "set", VETH_B, "up")
        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), str(N), job)
        trials = c.trials(j)
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
        ev = c.events(j)
        ok = [int(e["trial"]) for e in ev if e.get("type") == "trial.succeeded"]
        self.assertEqual(sorted(ok), list(range(N)), "each trial recorded once")
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), N)
        lost = [int(e["trial"]) for e in ev if e.get("type") == "trial.lost"]
        self.assertTrue(lost, "the cut lost w2's trials: %r" % ev)
        c.wait_for(lambda: c.redis.hgetall("cgq:node:w2").get("state") == "alive", 20,
                   "w2 back after the cut")
        print("cut 2 trials off for >= 3 s: lost %d, re-run %d, late results kept %d" % (
            len(lost), sum(1 for e in ev if e.get("type") == "trial.running") - N,
            sum(1 for e in ev if e.get("type") in ("trial.late_result", "trial.adopted"))))


if __name__ == "__main__":
    SKIP = setup_namespaces()
    if SKIP:
        print("skipped: " + SKIP)
    try:
        main()
    finally:
        if not SKIP:
            teardown_namespaces()
