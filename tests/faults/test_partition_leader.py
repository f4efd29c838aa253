#!/usr/bin/env python3
"""The leader coordinator cut off from Redis past its lease, in network
namespaces this test creates (root only; exit 77 with the reason elsewhere).

The test process moves itself into namespace A: Redis, the standby and the
workers live there. The leader lives in namespace B, joined to A by two veth
pairs: one it reaches Redis through, one the workers reach it through. Mid-job
the Redis pair drops every packet (a partition, not a refusal) for longer than
the lease; the nodes' pair stays up, so the old leader still hears its
workers. Checked:

  - the standby takes the lease with a new epoch;
  - the old leader writes nothing after that: a third connection runs
    MONITOR, and no write command (direct, inside MULTI/EXEC, or inside a Lua
    script) from the old leader's address follows the standby's INCR of
    cgq:seq:epoch, not even the packets the kernel retransmits at the heal;
  - healed, the old leader logs `lost the leader lease` and stands by (same
    process, re-executed), and does not take the lease back;
  - every trial ran once and ended once (the workers' markers, the records,
    the events, the leaderboard)."""

import os
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402
from harness import CgqTestCase, Netns, Proc, binary, free_port, main, read_text, tail  # noqa: E402

N = 16
LEASE = "1s"
NET = Netns("cgql")
SKIP = None
NS_A = None

WRITES = {"set", "setex", "psetex", "setnx", "getset", "getdel", "del", "unlink", "expire",
          "pexpire", "expireat", "pexpireat", "persist", "incr", "incrby", "incrbyfloat", "decr",
          "decrby", "append", "hset", "hmset", "hsetnx", "hdel", "hincrby", "hincrbyfloat",
          "zadd", "zrem", "zincrby", "zremrangebyscore", "zremrangebyrank", "zpopmin",
          "zpopmax", "sadd", "srem", "spop", "smove", "lpush", "rpush", "lpop", "rpop", "lrem",
          "ltrim", "lset", "linsert", "lmove", "rpoplpush", "xadd", "xtrim", "xdel", "rename",
          "renamenx", "copy", "restore", "publish", "flushdb", "flushall", "eval", "evalsha",
          "function", "fcall"}


class Monitor:
    """MONITOR on its own connection; lines kept in Redis's order, each as
    (client address or 'lua', command name, raw line)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.sock.sendall(b"MONITOR\r\n")
        self.lines, self.stop = [], threading.Event()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        buf = b""
        self.sock.settimeout(0.2)
        while not self.stop.is_set():
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            if not data:
                return
            buf += data
            while b"\r\n" in buf:
                line, buf = buf.split(b"\r\n", 1)
                self.lines.append(line.decode(errors="replace"))

    def close(self):
        self.stop.set()
        self.t.join(5)
        self.sock.close()

    def commands(self):
        """[(client, cmd, line)] with each Lua line given the client of the
        EVAL/EVALSHA that ran it (Redis 7 shows a script's commands before
        the script's own line)."""
        out, pending = [], []
        for line in self.lines:
            if not line.startswith("+") or "[" not in line:
                continue
            try:
                who = line.split("[", 1)[1].split("]", 1)[0].split(" ", 1)[1]
                cmd = line.split("]", 1)[1].strip().split(" ", 1)[0].strip('"').lower()
            except IndexError:
                continue
            if who == "lua":
                pending.append((cmd, line))
                continue
            out.extend((who, c, l) for c, l in pending)
            pending = []
            out.append((who, cmd, line))
        out.extend(("lua?", c, l) for c, l in pending)
        return out


class LeaderPartitionTest(CgqTestCase):
    def setUp(self):
        if SKIP:
            raise unittest.SkipTest(SKIP)
        super().setUp()

    def test_leader_cut_off_from_redis_past_its_lease(self):
        c = self.cluster
        ns_b = NET.add("b%d" % len(NET.names))
        redis_a, redis_b, rlink = NET.link(NS_A, ns_b)   # the leader's way to Redis
        nodes_a, nodes_b, _ = NET.link(NS_A, ns_b)       # the workers' way to the leader
        c.start_redis(bind=(redis_a,))
        p_nodes, p_ctl = free_port(), free_port()
        leader = Proc("coordinator", [
            "ip", "netns", "exec", ns_b, binary("cgq-coordinator"), "--redis",
            "redis://%s:%d/0" % (redis_a, c.redis_port), "--bind",
            "tcp://%s:%d" % (nodes_b, p_nodes), "--control", "tcp://%s:%d" % (nodes_b, p_ctl),
            "--heartbeat", "200ms", "--lease", LEASE, "--insecure"], c.logdir,
            capture_stdout=True)
        c.procs.append(leader)
        c.coordinator = leader
        line = leader.wait_first_line(30)
        m = harness.READY_RE.match(line or "")
        self.assertTrue(m, "ready line %r:\n%s" % (line, tail(leader.err_path)))
        old = c.epoch = int(m.group(3))
        s_nodes, s_ctl = free_port(), free_port()
        standby = Proc("standby", [
            binary("cgq-coordinator"), "--redis", c.redis_url, "--bind",
            "tcp://127.0.0.1:%d" % s_nodes, "--control", "tcp://127.0.0.1:%d" % s_ctl,
            "--heartbeat", "200ms", "--lease", LEASE], c.logdir, capture_stdout=True)
        c.procs.append(standby)
        line = standby.wait_first_line(30)
        self.assertTrue(line and line.startswith("cgq-coordinator standby leader=%d " % old),
                        "%r\n%s" % (line, tail(standby.err_path)))
        c.nodes_ep = "tcp://%s:%d,tcp://127.0.0.1:%d" % (nodes_b, p_nodes, s_nodes)
        c.control_ep = "tcp://%s:%d,tcp://127.0.0.1:%d" % (nodes_b, p_ctl, s_ctl)
        for w in ("w1", "w2"):
            c.start_worker(w, cpus=2)
        j = c.submit(c.write_counted_job("leader-cut", N, 0.8))
        c.wait_value(lambda: sum(1 for h in c.trials(j).values() if h.get("state") == "running"),
                     lambda n: n == 4, 30, "4 trials to run")
        mon = Monitor(c.redis_port)
        t_cut = time.monotonic()
        NET.cut(rlink)
        healed = False
        try:
            c.wait_for(lambda: int((c.redis.cmd("GET", "cgq:leader") or "0").split()[0]) > old,
                       20, "the standby to take the lease")
            took = time.monotonic() - t_cut
            epoch = int(c.redis.cmd("GET", "cgq:leader").split()[0])
            self.assertTrue(c.redis.cmd("GET", "cgq:leader").endswith(":%d" % standby.pid))
            time.sleep(2.0)  # the cut goes on past the takeover
            progress = int(c.job(j).get("succeeded", "0"))
            time.sleep(1.0)
            progress = int(c.job(j).get("succeeded", "0")) - progress
        finally:
            NET.heal(rlink)
            healed = True
        t_heal = time.monotonic()
        c.wait_for(lambda: "lost the leader lease" in read_text(leader.err_path), 20,
                   "the old leader to notice, once healed")
        c.wait_for(lambda: "cgq-coordinator standby leader=%d " % epoch in
                   read_text(leader.out_path), 20, "the old leader to stand by")
        stepped = time.monotonic() - t_heal
        self.assertTrue(leader.alive(), "it stands by; it does not exit")
        c.coordinator = standby
        job = c.wait_job(j, 90)
        time.sleep(1.0)  # whatever the old leader still had in flight has arrived
        mon.close()
        self.assertTrue(healed)
        # The standby leads the job while the cut lasts: the workers moved to
        # it. (They move after heartbeat x 5 of silence; a leader that cannot
        # reach Redis must not keep them, or nothing runs until the heal.)
        self.assertGreater(progress, 0, "no trial succeeded during the cut, though the standby "
                           "held the lease: the workers stayed with the leader cut off from "
                           "Redis; see the workers' logs")
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), str(N), job)
        trials = c.trials(j)
        self.assertEqual(sorted(trials), list(range(N)))
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
        ok = [int(e["trial"]) for e in c.events(j) if e.get("type") == "trial.succeeded"]
        self.assertEqual(sorted(ok), list(range(N)), "one trial.succeeded event per trial")
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), N)
        self.assertEqual(c.counted_runs(), [(t, 1) for t in range(N)],
                         "each trial's script ran once")
        info = c.redis.hgetall("cgq:coordinator")
        self.assertEqual(info.get("epoch"), str(epoch), info)
        self.assertTrue(info.get("batch", "").startswith("%d:" % epoch), info)
        self.assertEqual(int(c.redis.cmd("GET", "cgq:leader").split()[0]), epoch,
                         "the old leader did not take the lease back")
        # MONITOR: nothing written by the old leader after the takeover.
        cmds = mon.commands()
        takeover = [i for i, (who, cmd, line) in enumerate(cmds)
                    if cmd == "incr" and "cgq:seq:epoch" in line]
        self.assertTrue(takeover, "MONITOR saw the standby's INCR of cgq:seq:epoch")
        after = cmds[takeover[0] + 1:]
        theirs = [(cmd, line) for who, cmd, line in after if who.startswith(redis_b + ":")]
        self.assertTrue([1 for who, cmd, line in after if who.startswith("127.0.0.1:") and
                         cmd in ("hset", "xadd", "zadd")],
                        "MONITOR shows the new leader's writes (the check can see writes)")
        bad = [line for cmd, line in theirs if cmd in WRITES and cmd not in ("eval", "evalsha")]
        self.assertEqual(bad, [], "the old leader wrote after its lease was taken")
        self.assertEqual([line for who, cmd, line in after if who == "lua?" and cmd in WRITES],
                         [], "a script's writes whose client MONITOR had not shown yet")
        stray = [line for cmd, line in theirs if cmd == "exec"]
        print("leader cut off from Redis: standby held the lease %.1f s after the cut "
              "(lease %s); %d trial(s) succeeded in the 1 s measured during the cut; healed, "
              "the old leader stood by %.1f s later; %d command(s) of the old leader after "
              "the takeover, none a write (%d EXEC, aborted by the fence)"
              % (took, LEASE, progress, stepped, len(theirs), len(stray)))


if __name__ == "__main__":
    NS_A, SKIP = NET.enter_home()
    try:
        main()
    finally:
        NET.close()
