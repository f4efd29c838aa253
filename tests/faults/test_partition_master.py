#!/usr/bin/env python3
"""The Redis master cut off from the sentinels' majority, in network
namespaces this test creates (root only; exit 77 with the reason elsewhere,
or without redis-sentinel).

The test process moves itself into namespace A: the replica, three
redis-sentinel processes, the coordinator (--redis sentinel://...,
--redis-replicas 1) and the workers live there. The master lives alone in
namespace M, joined to A by a veth pair. Mid-job that pair drops every packet
(a partition: the master is up and still thinks it is the master) for longer
than the sentinels' down-after. Checked:

  - the sentinels promote the replica, and the job finishes on it with every
    trial run once and ended once (the workers' markers, the records, the
    events, the leaderboard): no acknowledged result lost;
  - the old master, cut off, still takes writes from a client on its side of
    the cut (it has no min-replicas-to-write: what is true today; the second
    test sets min-replicas-to-write 1 and min-replicas-max-lag 2 and sees it
    refuse them with NOREPLICAS), but none of them is used: healed, the
    sentinels turn it into the new master's replica and it resyncs, so a
    key written there during the cut is gone, and what the coordinator's
    dropped connection delivers to it late goes the same way;
  - after the failover the coordinator only ever names the new master."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import (CgqTestCase, Netns, Proc, Redis, RedisError, free_port, main,  # noqa: E402
                     read_text, tail)

NAME = "cgqm"
NET = Netns("cgqm")
SKIP = None
NS_A = None


class MasterPartitionTest(CgqTestCase):
    def setUp(self):
        if SKIP:
            raise unittest.SkipTest(SKIP)
        super().setUp()
        self.ha = []

    def tearDown(self):
        # The coordinator and workers first, while Redis is there; then the
        # Redis set (ours, by PID); then the harness's checks.
        c = self.cluster
        problems = []
        for p in reversed([p for p in c.procs if p is not c.coordinator]):
            problems.append(p.stop())
        if c.coordinator is not None:
            problems.append(c.coordinator.stop())
        for p in c.procs:
            problems.append(p.sanitizer_report())
        for p in reversed(self.ha):
            if p.alive():
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            p.stop(5)
        c.procs, c.coordinator = [], None
        problems = [p for p in problems if p] + c.stop()
        if problems:
            self.fail("teardown found problems:\n  " + "\n  ".join(problems))

    def _proc(self, name, argv):
        p = Proc(name, argv, self.cluster.logdir)
        p.expect_exit = None  # not ours to judge; stopped by PID in tearDown
        self.ha.append(p)
        return p

    def _conf(self, name, text):
        d = os.path.join(self.tmp, name)
        os.makedirs(d, exist_ok=True)
        conf = os.path.join(d, name + ".conf")
        with open(conf, "w") as f:
            f.write(text.replace("DIR", d))
        return conf

    def _wait_ping(self, host, port, p, what):
        r = Redis(host, port, timeout=2)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and p.alive():
            try:
                if r.cmd("PING") == "PONG":
                    r.close()
                    return
            except (OSError, ConnectionError, RedisError):
                r.close()
            time.sleep(0.05)
        raise AssertionError("%s on %s:%d did not answer PING; log:\n%s" % (
            what, host, port, tail(p.out_path)))

    def _in_m(self, *args):
        """redis-cli against the old master from its own namespace."""
        r = subprocess.run(["ip", "netns", "exec", self.ns_m, "redis-cli", "-p",
                            str(self.mport)] + [str(a) for a in args],
                           capture_output=True, text=True, timeout=20)
        return r.stdout.strip()

    def _sentinel_master(self, port):
        r = Redis("127.0.0.1", port, timeout=2)
        try:
            return r.cmd("SENTINEL", "get-master-addr-by-name", NAME)
        finally:
            r.close()

    def test_master_cut_off_from_the_sentinels(self):
        self._cut_master(min_replicas=False)

    def test_master_with_min_replicas_refuses_writes_when_cut_off(self):
        """min-replicas-to-write 1, min-replicas-max-lag 2 on the master (as
        docs/operations.md suggests): cut off past the lag, it refuses."""
        self._cut_master(min_replicas=True)

    def _cut_master(self, min_replicas):
        c = self.cluster
        self.ns_m = ns_m = NET.add("m%d" % len(NET.names))
        addr_a, addr_m, link = NET.link(NS_A, ns_m)
        common = ("bind 127.0.0.1 %s\nprotected-mode no\ndaemonize no\ndir DIR\nlogfile \"\"\n"
                  % "ADDR")
        self.mport = mport = free_port()
        conf = self._conf("master", (common.replace("ADDR", addr_m) +
                                     "port %d\nsave \"\"\nappendonly yes\n"
                                     "appendfsync everysec\nrepl-diskless-sync-delay 0\n" % mport +
                                     ("min-replicas-to-write 1\nmin-replicas-max-lag 2\n"
                                      if min_replicas else "")))
        master = self._proc("master", ["ip", "netns", "exec", ns_m, "redis-server", conf])
        self._wait_ping(addr_m, mport, master, "the master (namespace M)")
        rport = free_port()
        conf = self._conf("replica", (common.replace("ADDR", addr_a) +
                                      "port %d\nsave \"\"\nappendonly yes\n"
                                      "appendfsync everysec\nreplicaof %s %d\n"
                                      % (rport, addr_m, mport)))
        replica = self._proc("replica", ["redis-server", conf])
        self._wait_ping("127.0.0.1", rport, replica, "the replica")
        sports = []
        for i in range(3):
            port = free_port()
            conf = self._conf("sentinel%d" % i, (
                common.replace("ADDR", addr_a) + "port %d\n"
                "sentinel monitor %s %s %d 2\nsentinel down-after-milliseconds %s 1000\n"
                "sentinel failover-timeout %s 4000\nsentinel parallel-syncs %s 1\n"
                % (port, NAME, addr_m, mport, NAME, NAME, NAME)))
            p = self._proc("sentinel%d" % i, ["redis-sentinel", conf])
            self._wait_ping("127.0.0.1", port, p, "sentinel%d" % i)
            sports.append(port)

        def ready():
            r = Redis("127.0.0.1", rport, timeout=2)
            try:
                if "master_link_status:up" not in r.cmd("INFO", "replication"):
                    return False
            finally:
                r.close()
            for port in sports:
                r = Redis("127.0.0.1", port, timeout=2)
                try:
                    flat = r.cmd("SENTINEL", "master", NAME)
                finally:
                    r.close()
                m = dict(zip(flat[0::2], flat[1::2]))
                if int(m.get("num-other-sentinels", 0)) < 2 or int(m.get("num-slaves", 0)) < 1:
                    return False
            return True
        c.wait_for(ready, 30, "the sentinels to know each other and the synced replica",
                   interval=0.2)

        c.redis_url = "sentinel://%s/%s/0" % (",".join("127.0.0.1:%d" % p for p in sports), NAME)
        c.redis = Redis(addr_m, mport)
        c.start_coordinator(extra=("--redis-replicas", "1"))
        for w in ("w1", "w2"):
            c.start_worker(w, cpus=2)
        n = 30
        j = c.submit(c.write_counted_job("master-cut", n, 0.5))
        c.wait_for(lambda: int(c.job(j).get("succeeded", "0")) >= 6, 40, "6 trials to succeed")
        # Everything the old master runs from now on, seen from its own side.
        mon = Proc("monitor-old-master", ["ip", "netns", "exec", ns_m, "redis-cli", "-p",
                                          str(mport), "monitor"], c.logdir)
        mon.expect_exit = None
        self.ha.append(mon)
        time.sleep(0.3)
        t_cut = time.monotonic()
        wall_cut = time.time()
        NET.cut(link)
        c.redis.close()
        try:
            c.wait_for(lambda: all(self._sentinel_master(p) == [addr_a, str(rport)]
                                   for p in sports), 30,
                       "every sentinel to name the replica as master", interval=0.1)
            failover_s = time.monotonic() - t_cut
            # A client on the old master's side writes during the cut (past
            # min-replicas-max-lag by now).
            time.sleep(max(0.0, 3.5 - failover_s))
            canary = self._in_m("SET", "cgq:test:minority-write", "cut")
            c.redis = Redis("127.0.0.1", rport)
            done = int(c.job(j).get("succeeded", "0"))
            c.wait_for(lambda: int(c.job(j).get("succeeded", "0")) >= done + 4, 30,
                       "trials to succeed on the new master during the cut")
            role_cut = self._in_m("ROLE").split()[0]
        finally:
            NET.heal(link)
        t_heal = time.monotonic()

        def demoted():
            role = self._in_m("ROLE").split()
            return (len(role) >= 4 and role[0] == "slave" and role[1] == addr_a and
                    role[2] == str(rport) and role[3] == "connected")
        c.wait_for(demoted, 30, "the old master to become the new master's replica, synced",
                   interval=0.2)
        demoted_s = time.monotonic() - t_heal

        self.assert_exactly_once(j, n)

        # What the old master took during the cut is not used.
        self.assertEqual(role_cut, "master", "cut off, the old master still says master")
        if min_replicas:
            self.assertTrue(canary.startswith("NOREPLICAS"), canary)
        else:
            self.assertEqual(canary, "OK", "without min-replicas-to-write the old master takes "
                             "writes while cut off; if this changed, update docs/operations.md")
        self.assertIsNone(c.redis.cmd("GET", "cgq:test:minority-write"))
        c.wait_for(lambda: self._in_m("EXISTS", "cgq:test:minority-write") == "0", 20,
                   "the old master's own write to be gone after its resync")
        self.assertEqual(self._in_m("HGET", "cgq:coordinator", "batch"),
                         c.redis.hgetall("cgq:coordinator").get("batch"),
                         "the old master holds the new master's state, not its own")
        log = read_text(c.coordinator.err_path)
        found = re.findall(r"master '%s' is at ([\d.]+):(\d+)" % NAME, log)
        self.assertIn((addr_a, str(rport)), found, log[-3000:])
        after = found[found.index((addr_a, str(rport))):]
        self.assertEqual(set(after), {(addr_a, str(rport))},
                         "after the failover the coordinator only named the new master")
        # Writes the old master ran after the cut, from anyone but us: reported.
        mon.stop(5)
        late = []
        for line in read_text(mon.out_path).splitlines():
            m = re.match(r'^(\d+\.\d+) \[\d+ ([^\]]+)\] "(\w+)"', line)
            if m and float(m.group(1)) > wall_cut and m.group(3).lower() in (
                    "exec", "hset", "zadd", "xadd", "set", "del", "incr", "evalsha"):
                late.append(line)
        print("master cut off (min-replicas-to-write %s): sentinels named the replica %.1f s "
              "after the cut; the old master answered a write on its side with %r and ran %d "
              "write command(s) after the cut in all; healed, it was the new master's synced "
              "replica %.1f s later, those writes gone"
              % (1 if min_replicas else 0, failover_s, canary, len(late), demoted_s))


if __name__ == "__main__":
    SKIP = Netns.skip_reason()
    if not SKIP and not (shutil.which("redis-sentinel") and shutil.which("redis-cli")):
        SKIP = "redis-sentinel and redis-cli are needed (Debian: redis-sentinel, redis-tools)"
    NS_A, SKIP = NET.enter_home(SKIP)
    try:
        main()
    finally:
        NET.close()
