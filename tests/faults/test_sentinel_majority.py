#!/usr/bin/env python3
"""Finding the master through Redis Sentinel when some sentinels lie or stop
(common/store_sentinel.c): a real master, replica and three redis-sentinel
processes (tests/faults/test_sentinel.py's HaSet), plus two fakes listed
FIRST in the URL:

  - a stale sentinel (a loopback server of this test that speaks RESP and
    answers SENTINEL MASTER as a sentinel that missed the failover would:
    the old master, config-epoch 0);
  - a hostile one, answering every request with a frame of garbage.

The master is killed mid-job and restarted (it says ROLE master until a
sentinel demotes it): the coordinator must take the majority's newest
config-epoch, never the stale sentinel's old master, log why, and finish the
job with every trial exactly once.

Then the sentinels and the master are all stopped (SIGSTOP: packets taken,
nothing answered): the coordinator's loop must not wait on them, its node
heartbeats answered within 500 ms throughout; after SIGCONT the job
finishes.

Skipped, with the reason printed, where redis-sentinel is not installed."""

import os
import re
import signal
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, HERE)
from harness import Redis, ZmtpPeer, endpoint_port, main, read_text  # noqa: E402
from harness import heartbeat_rtt as harness_rtt  # noqa: E402
import test_sentinel  # noqa: E402

NAME = test_sentinel.NAME

LIMIT_S = 0.5


def resp_array(items):
    out = b"*%d\r\n" % len(items)
    for s in items:
        s = s.encode() if isinstance(s, str) else s
        out += b"$%d\r\n%s\r\n" % (len(s), s)
    return out


class FakeSentinel:
    """A loopback TCP server answering each RESP request with answer(argv)."""

    def __init__(self, answer):
        self.answer = answer
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.asked = 0
        self.stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn):
        f = conn.makefile("rb")
        try:
            while not self.stop:
                line = f.readline()
                if not line.startswith(b"*"):
                    return
                argv = []
                for _ in range(int(line[1:])):
                    n = int(f.readline()[1:])
                    argv.append(f.read(n + 2)[:-2].decode())
                self.asked += 1
                conn.sendall(self.answer(argv))
        except (OSError, ValueError):
            pass
        finally:
            f.close()
            conn.close()

    def close(self):
        self.stop = True
        self.sock.close()


class SentinelMajorityTest(test_sentinel.SentinelBase):
    def _fakes(self, old_port):
        def stale(argv):
            if [a.lower() for a in argv[:2]] == ["sentinel", "master"]:
                return resp_array(["name", NAME, "ip", "127.0.0.1", "port", str(old_port),
                                   "flags", "master", "config-epoch", "0"])
            return b"+OK\r\n"

        def hostile(argv):
            return b"*7\r\n$3\r\nip\r\n:zz\r\n\x00\xff garbage\r\n"
        self.stale, self.hostile = FakeSentinel(stale), FakeSentinel(hostile)
        self.addCleanup(self.stale.close)
        self.addCleanup(self.hostile.close)

    def _url(self):
        ports = [self.stale.port, self.hostile.port] + [s[0] for s in self.ha.sentinels]
        return "sentinel://%s/%s/0" % (",".join("127.0.0.1:%d" % p for p in ports), NAME)

    def _start_set(self):
        ha, c = self.ha, self.cluster
        mport = ha.start(self)
        self._fakes(mport)
        c.redis_url = self._url()
        c.redis = Redis("127.0.0.1", mport)
        return mport

    def test_stale_and_hostile_sentinels_are_outvoted(self):
        ha, c = self.ha, self.cluster
        old = self._start_set()
        c.start_coordinator(extra=("--redis-replicas", "1"))
        c.start_worker("w1", cpus=2)
        c.start_worker("w2", cpus=2)
        self.assertGreater(self.stale.asked, 0, "the stale sentinel was never asked")
        n = 30
        j = c.submit(c.write_counted_job("sentinel-stale", n, 0.4))
        c.wait_for(lambda: int(c.job(j).get("succeeded", "0")) >= 8, 40, "8 trials to succeed")
        asked = self.stale.asked
        ha.redis["master"][2].kill9()
        c.redis.close()
        c.wait_for(lambda: all(ha.master_port(i) != old for i in range(3)), 30,
                   "every sentinel to name a new master", interval=0.1)
        new = ha.master_port(0)
        c.redis = Redis("127.0.0.1", new)
        # The old master back, saying ROLE master until a sentinel demotes
        # it: what the stale sentinel names is a writable Redis.
        ha.start_redis("master", port=old)
        self.assert_exactly_once(j, n)
        log = read_text(c.coordinator.err_path)
        found = [int(p) for p in re.findall(r"master '%s' is at 127\.0\.0\.1:(\d+)" % NAME, log)]
        self.assertEqual(found[0], old, log[-2000:])
        self.assertEqual(found[1:], [new] * (len(found) - 1),
                         "after the failover only the new master was taken: %s" % found)
        self.assertGreater(self.stale.asked, asked, "the stale sentinel was asked after the kill")
        self.assertGreater(self.hostile.asked, 0, "the hostile sentinel was asked")
        # The CLI (not gated) takes the same rule.
        r = c.cgq("status", timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_stopped_sentinels_and_master_never_hold_the_loop(self):
        ha, c = self.ha, self.cluster
        self._start_set()
        # No --redis-replicas: a WAIT behind a stopped replica may hold a
        # lease renewal up to --redis-wait-timeout (docs/operations.md).
        c.start_coordinator()
        c.start_worker("w1", cpus=2)
        n = 12
        j = c.submit(c.write_counted_job("sentinel-stopped", n, 0.3))
        c.wait_for(lambda: int(c.job(j).get("succeeded", "0")) >= 2, 40, "2 trials to succeed")
        node = ZmtpPeer("127.0.0.1", endpoint_port(c.nodes_ep), identity=b"probe-peer", timeout=5)

        def heartbeat_rtt():
            return harness_rtt(node)

        self.assertLess(heartbeat_rtt(), LIMIT_S)
        stopped = [s[2] for s in ha.sentinels] + [ha.redis["master"][2], ha.redis["replica"][2]]
        for p in stopped:
            os.kill(p.pid, signal.SIGSTOP)
        rtts = []
        try:
            end = time.monotonic() + 8
            while time.monotonic() < end:
                rtts.append(heartbeat_rtt())
                time.sleep(0.05)
        finally:
            for p in stopped:
                os.kill(p.pid, signal.SIGCONT)
        node.close(linger=0)
        print("heartbeat round trips while the sentinels and Redis were stopped: max %.0f ms "
              "of %d" % (1000 * max(rtts), len(rtts)), file=sys.stderr)
        self.assertLess(max(rtts), LIMIT_S, "heartbeat round trips: %s" % rtts)
        log = read_text(c.coordinator.err_path)
        self.assertIn("cannot find the master '%s' through the sentinels" % NAME, log)
        self.assertRegex(log, r"no answer within 100 ms")
        # With the real sentinels stopped, the fakes' answers decide nothing
        # (2 of 5), and the hostile one's nonsense is named.
        self.assertRegex(log, r"sentinel 127\.0\.0\.1:%d: [^;]*[Pp]rotocol error" % self.hostile.port)
        self.assertRegex(log, r"2 of 5 sentinels answered|1 of 5 sentinels answered")
        self.assert_exactly_once(j, n, timeout=90)


if __name__ == "__main__":
    main()
