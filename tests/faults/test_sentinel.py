#!/usr/bin/env python3
"""Redis Sentinel: a master, one replica and three redis-sentinel processes
(Debian's), all on free loopback ports, started and stopped by PID here; the
coordinator, the workers and the CLI get --redis sentinel://.../cgqm and the
coordinator --redis-replicas 1 (Acks wait for WAIT 1).

  - kill -9 the master mid-job: the sentinels fail over (down-after 1 s), the
    job finishes on the new master, every trial ran and ended exactly once
    (the workers' markers, the records, the events); the old master,
    restarted, comes back as a replica and no coordinator connection ever
    reaches it;
  - one sentinel down from the start, then all three: a reconnect finds no
    master, says so (coordinator log, `cgq status`), retries, and once the
    sentinels are back the job finishes, nothing lost or run twice;
  - the replica paused (SIGSTOP) past the WAIT timeout: results are applied
    but their Acks are held (/metrics) until it is resumed.

Skipped, with the reason printed, where redis-sentinel is not installed."""

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import (CgqTestCase, Proc, Redis, RedisError, free_port, main, read_text,  # noqa: E402
                     tail)

NAME = "cgqm"
REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# The Python client (clients/python) needs Debian's python3-redis.
SYS_PY = "/usr/bin/python3"
CLIENT_WAIT = r'''
import sys, cgq
c = cgq.Client(redis=sys.argv[1], curve_secret="", curve_server="")
job = c.job(int(sys.argv[2]))
print("before", job.state, flush=True)
print("after", job.wait(progress=False, timeout=60), flush=True)
'''


def client_usable():
    if not os.access(SYS_PY, os.X_OK):
        return False
    r = subprocess.run([SYS_PY, "-c", "import redis.sentinel"], capture_output=True)
    return r.returncode == 0


def have_sentinel():
    return shutil.which("redis-sentinel") is not None and shutil.which("redis-server") is not None


class HaSet:
    """A master, a replica and three sentinels under tmp; every process is
    ours, by PID (Proc)."""

    def __init__(self, tmp, logdir):
        self.tmp, self.logdir = tmp, logdir
        self.procs = []
        self.redis = {}      # name -> (port, conf, Proc)
        self.sentinels = []  # [(port, conf, Proc)]

    def _proc(self, name, argv):
        p = Proc(name, argv, self.logdir)
        p.expect_exit = None  # not ours to judge; stopped by PID in tearDown
        self.procs.append(p)
        return p

    def _wait_ping(self, port, p, what):
        r = Redis("127.0.0.1", port, timeout=2)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and p.alive():
            try:
                if r.cmd("PING") == "PONG":
                    return r
            except (OSError, ConnectionError, RedisError):
                r.close()
            time.sleep(0.05)
        raise AssertionError("%s on port %d did not answer PING; log:\n%s" % (
            what, port, tail(p.out_path)))

    def start_redis(self, name, replica_of=None, port=None):
        """redis-server with AOF (appendfsync everysec); restarted with the
        same config when port is given."""
        if port is None:
            port = free_port()
            d = os.path.join(self.tmp, name)
            os.makedirs(d, exist_ok=True)
            conf = os.path.join(d, "redis.conf")
            with open(conf, "w") as f:
                f.write("port %d\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir %s\n"
                        "save \"\"\nlogfile \"\"\nappendonly yes\nappendfsync everysec\n"
                        "repl-diskless-sync-delay 0\n" % (port, d))
                if replica_of:
                    f.write("replicaof 127.0.0.1 %d\n" % replica_of)
        else:
            conf = self.redis[name][1]
        p = self._proc(name, ["redis-server", conf])
        self.redis[name] = (port, conf, p)
        self._wait_ping(port, p, name).close()
        return port

    def start_sentinels(self, master_port, n=3):
        for i in range(n):
            port = free_port()
            d = os.path.join(self.tmp, "sentinel%d" % i)
            os.makedirs(d, exist_ok=True)
            conf = os.path.join(d, "sentinel.conf")
            with open(conf, "w") as f:
                f.write("port %d\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\n"
                        "logfile \"\"\ndir %s\n"
                        "sentinel monitor %s 127.0.0.1 %d 2\n"
                        "sentinel down-after-milliseconds %s 1000\n"
                        "sentinel failover-timeout %s 4000\n"
                        "sentinel parallel-syncs %s 1\n"
                        % (port, d, NAME, master_port, NAME, NAME, NAME))
            p = self._proc("sentinel%d" % i, ["redis-sentinel", conf])
            self.sentinels.append([port, conf, p])
            self._wait_ping(port, p, "sentinel%d" % i).close()

    def start(self, test):
        """The master, its replica and three sentinels, ready (wait_ready).
        Returns the master's port."""
        mport = self.start_redis("master")
        self.start_redis("replica", replica_of=mport)
        self.start_sentinels(mport)
        self.wait_ready(test)
        return mport

    def restart_sentinel(self, i):
        port, conf, _ = self.sentinels[i]
        p = self._proc("sentinel%d" % i, ["redis-sentinel", conf])
        self.sentinels[i][2] = p
        self._wait_ping(port, p, "sentinel%d" % i).close()

    def url(self):
        return "sentinel://%s/%s/0" % (",".join("127.0.0.1:%d" % s[0] for s in self.sentinels),
                                       NAME)

    def sentinel_master(self, i):
        r = Redis("127.0.0.1", self.sentinels[i][0], timeout=2)
        try:
            flat = r.cmd("SENTINEL", "master", NAME)
            return dict(zip(flat[0::2], flat[1::2]))
        finally:
            r.close()

    def master_port(self, i):
        r = Redis("127.0.0.1", self.sentinels[i][0], timeout=2)
        try:
            return int(r.cmd("SENTINEL", "get-master-addr-by-name", NAME)[1])
        finally:
            r.close()

    def wait_ready(self, test, replicas=1):
        """The replica in sync, and every sentinel knows the other two and
        the replica. (Until its first sync the replica is listed but empty:
        a failover then would promote nothing.)"""
        def ready():
            r = Redis("127.0.0.1", self.redis["replica"][0], timeout=2)
            try:
                if "master_link_status:up" not in r.cmd("INFO", "replication"):
                    return False
            finally:
                r.close()
            for i in range(len(self.sentinels)):
                m = self.sentinel_master(i)
                if int(m.get("num-other-sentinels", 0)) < len(self.sentinels) - 1 or \
                        int(m.get("num-slaves", 0)) < replicas:
                    return False
            return True
        test.cluster.wait_for(ready, 30, "the sentinels to know each other and the replica",
                              interval=0.2)

    def stop(self):
        for p in reversed(self.procs):
            if p.alive():
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            p.stop(5)


def metric(port, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as resp:
        body = resp.read().decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), body, re.M)
    return float(m.group(1)) if m else None


class SentinelBase(CgqTestCase):
    """An HaSet per test, stopped after the coordinator and workers (no
    tests of its own: test_sentinel_majority.py builds on it too)."""

    def setUp(self):
        if not have_sentinel():
            print("skipped: redis-sentinel is not installed (apt-get install redis-sentinel; "
                  "scripts/bootstrap installs it)")
            self.skipTest("redis-sentinel is not installed")
        super().setUp()
        self.ha = HaSet(self.tmp, self.cluster.logdir)

    def tearDown(self):
        # The coordinator and workers first, while Redis is there; then the
        # Redis set; then the harness's own checks (leftovers, sanitizers).
        c = self.cluster
        problems = []
        for p in reversed([p for p in c.procs if p is not c.coordinator]):
            problems.append(p.stop())
        if c.coordinator is not None:
            problems.append(c.coordinator.stop())
        for p in c.procs:
            problems.append(p.sanitizer_report())
        self.ha.stop()
        c.procs, c.coordinator = [], None
        problems = [p for p in problems if p] + c.stop()
        if problems:
            self.fail("teardown found problems:\n  " + "\n  ".join(problems))

    def _start(self, coord_extra=(), workers=(("w1", 2), ("w2", 2))):
        ha, c = self.ha, self.cluster
        mport = ha.start(self)
        c.redis_url = ha.url()
        c.redis = Redis("127.0.0.1", mport)
        c.start_coordinator(extra=("--redis-replicas", "1") + tuple(coord_extra))
        for wid, cpus in workers:
            c.start_worker(wid, cpus=cpus)
        return mport


class SentinelTest(SentinelBase):
    def test_failover_mid_job(self):
        ha, c = self.ha, self.cluster
        old = self._start()
        n = 40
        j = c.submit(c.write_counted_job("sentinel-failover", n, 0.5))
        c.wait_for(lambda: int(c.job(j).get("succeeded", "0")) >= 10, 40,
                   "a quarter of the trials to succeed")
        # A Python client (cgq.Client(redis="sentinel://...")) waits on the
        # job through the failover: its connection finds the new master.
        pyc = None
        if client_usable():
            env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "clients", "python"))
            pyc = subprocess.Popen([SYS_PY, "-c", CLIENT_WAIT, ha.url(), str(j)], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            c.wait_for(lambda: os.path.exists("/proc/%d" % pyc.pid), 5, "the client to start")
            time.sleep(1.0)  # it has read the job from the old master
        else:
            print("the Python client part skipped: %s cannot import redis.sentinel" % SYS_PY,
                  file=sys.stderr)
        killed_at = time.monotonic()
        ha.redis["master"][2].kill9()
        c.redis.close()
        c.wait_for(lambda: all(ha.master_port(i) != old for i in range(3)), 30,
                   "every sentinel to name a new master", interval=0.1)
        new = ha.master_port(0)
        self.assertEqual(new, ha.redis["replica"][0], "the replica was promoted")
        print("failover: sentinels named the new master %.1f s after the kill"
              % (time.monotonic() - killed_at), file=sys.stderr)
        c.redis = Redis("127.0.0.1", new)

        # The old master, restarted with its own config (it still says it
        # is a master until a sentinel tells it otherwise): watched for any
        # client that is not a sentinel, the replication link or us.
        ha.start_redis("master", port=old)
        strangers, stop = [], threading.Event()

        def watch():
            r = Redis("127.0.0.1", old, timeout=2)
            me = None
            while not stop.is_set():
                try:
                    me = me or r.cmd("CLIENT", "ID")
                    for line in r.cmd("CLIENT", "LIST").splitlines():
                        f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
                        if f.get("id") == str(me) or f.get("name", "").startswith(
                                ("sentinel-", "test-")):
                            continue
                        if "M" in f.get("flags", "") or "S" in f.get("flags", ""):
                            continue  # the replication link
                        if f.get("cmd") == "NULL":
                            # Nothing sent yet (a sentinel's new link seen
                            # before its CLIENT SETNAME). The store sends
                            # PING or AUTH at once, and keeps a connection
                            # only to a Redis that says ROLE master.
                            continue
                        strangers.append(line)
                except (OSError, ConnectionError, RedisError):
                    r.close()
                    me = None
                time.sleep(0.05)
            r.close()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            self.assert_exactly_once(j, n)

            def demoted():
                r = Redis("127.0.0.1", old, timeout=2)
                try:
                    r.cmd("CLIENT", "SETNAME", "test-demoted")  # not a stranger
                    role = r.cmd("ROLE")
                    return role[0] == "slave" and int(role[2]) == new
                finally:
                    r.close()
            c.wait_for(demoted, 30, "the old master to come back as the new one's replica",
                       interval=0.2)
        finally:
            stop.set()
            watcher.join(5)
        self.assertEqual(strangers, [], "a client other than the sentinels reached the old master")
        if pyc is not None:
            try:
                out, err = pyc.communicate(timeout=60)
            finally:
                if pyc.poll() is None:
                    pyc.kill()
                    pyc.wait()
            self.assertEqual(pyc.returncode, 0, err)
            self.assertEqual(out.split(), ["before", "running", "after", "finished"], err)
        log = read_text(c.coordinator.err_path)
        self.assertIn("master '%s' is at 127.0.0.1:%d" % (NAME, new), log)
        found = re.findall(r"master '%s' is at 127\.0\.0\.1:(\d+)" % NAME, log)
        self.assertEqual([int(p) for p in found[1:]], [new] * (len(found) - 1),
                         "after the failover the coordinator only connected to the new master")
        # The journal's marker is on the new master: its batches went there.
        self.assertTrue(c.redis.hgetall("cgq:coordinator").get("batch", "").startswith(
            "%d:" % c.epoch))

    def test_failover_to_lagging_replica(self):
        """The replica stopped (SIGSTOP) for 4 s, longer than --durable-after
        (3 s), while trials end on the master; then the master is killed and
        the replica resumed: the sentinels promote it though it lacks those
        seconds. Their results were never acked (WAIT 1 came back short), so
        the journal still holds them and replays them on the new master.
        (With --redis-replicas 0 they would have been acked after 3 s and
        forgotten by journal and workers alike: lost.)"""
        ha, c = self.ha, self.cluster
        old = self._start()
        n = 40
        j = c.submit(c.write_counted_job("sentinel-lag-failover", n, 0.5))
        c.wait_for(lambda: int(c.job(j).get("succeeded", "0")) >= 6, 40, "6 trials to succeed")
        replica = ha.redis["replica"][2]
        os.kill(replica.pid, signal.SIGSTOP)
        try:
            # 32 MiB of junk first: the stopped replica's socket buffers fill
            # with it, and what the master writes after stays on the master's
            # side, to die with it. (Else the replica would read all it
            # missed from its socket once resumed, and lag in nothing.)
            for i in range(4):
                c.redis.cmd("SET", "junk:%d" % i, "x" * (8 << 20))
            before = int(c.job(j).get("succeeded", "0"))
            time.sleep(4.0)
            self.assertGreater(int(c.job(j).get("succeeded", "0")), before,
                               "trials ended on the master while the replica was stopped")
            ha.redis["master"][2].kill9()
            c.redis.close()
        finally:
            os.kill(replica.pid, signal.SIGCONT)
        c.wait_for(lambda: all(ha.master_port(i) != old for i in range(3)), 40,
                   "every sentinel to name a new master", interval=0.1)
        new = ha.master_port(0)
        self.assertEqual(new, ha.redis["replica"][0], "the replica was promoted")
        c.redis = Redis("127.0.0.1", new)
        # A replica for the new master, so that WAIT 1 can confirm again.
        ha.start_redis("master", port=old)
        self.assert_exactly_once(j, n)
        log = read_text(c.coordinator.err_path)
        self.assertRegex(log, r"replayed \d+ journaled batch", "the journal filled the gap")

    def test_sentinels_down(self):
        ha, c = self.ha, self.cluster
        mport = ha.start(self)
        # The first sentinel of the URL down from the start: the next answers.
        ha.sentinels[0][2].kill9()
        c.redis_url = ha.url()
        c.redis = Redis("127.0.0.1", mport)
        c.start_coordinator(extra=("--redis-replicas", "1"))
        c.start_worker("w1", cpus=2)
        n = 16
        j = c.submit(c.write_counted_job("sentinel-down", n, 0.4))
        c.wait_for(lambda: int(c.job(j).get("succeeded", "0")) >= 4, 40, "4 trials to succeed")
        # All down, and the coordinator's connection dropped: it must ask.
        for s in ha.sentinels[1:]:
            s[2].kill9()
        c.redis.cmd("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        c.wait_for(lambda: "cannot find the master '%s' through the sentinels" % NAME
                   in read_text(c.coordinator.err_path), 20,
                   "the coordinator to say it cannot find the master")
        r = c.cgq("status", timeout=30)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("cannot find the master '%s' through the sentinels" % NAME, r.stderr)
        self.assertIn("redis-sentinel", r.stderr)
        held = int(c.job(j).get("succeeded", "0"))
        time.sleep(1.5)  # trials end meanwhile; nothing can be written
        self.assertEqual(int(c.job(j).get("succeeded", "0")), held, "written without a master?")
        for i in range(3):
            ha.restart_sentinel(i)
        self.assert_exactly_once(j, n)
        self.assertEqual(c.cgq("status").returncode, 0)

    def test_replica_paused_holds_acks(self):
        ha, c = self.ha, self.cluster
        mport = free_port()
        self._start(coord_extra=("--redis-wait-timeout", "200ms", "--durable-after", "0",
                                 "--metrics", "127.0.0.1:%d" % mport),
                    workers=(("w1", 2),))
        replica = ha.redis["replica"][2]
        n = 12
        os.kill(replica.pid, signal.SIGSTOP)
        try:
            j = c.submit(c.write_counted_job("sentinel-lag", n, 0.3))
            c.wait_for(lambda: int(c.job(j).get("succeeded", "0")) >= 4, 40,
                       "4 trials to succeed (applied on the master)")
            # Past the 200 ms WAIT timeout, again and again: nothing acked.
            for _ in range(10):
                self.assertGreater(metric(mport, "cgq_acks_held"), 0)
                self.assertGreater(metric(mport, "cgq_redis_unconfirmed_batches"), 0)
                time.sleep(0.2)
            self.assertIn("confirmed batch", read_text(c.coordinator.err_path))
        finally:
            os.kill(replica.pid, signal.SIGCONT)
        c.wait_for(lambda: metric(mport, "cgq_redis_unconfirmed_batches") == 0, 20,
                   "the replica to confirm every batch")
        self.assert_exactly_once(j, n)
        c.wait_for(lambda: metric(mport, "cgq_acks_held") == 0, 20, "the held Acks to go out")


if __name__ == "__main__":
    main()
