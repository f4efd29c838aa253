#!/usr/bin/env python3
"""Redis black-holed, not refused: redis-server is stopped with SIGSTOP mid-job,
so its kernel still accepts TCP connections into the backlog but nothing ever
answers (as with packets dropped on the way). The coordinator's loop must not
wait on it: for the whole outage a node's heartbeat is answered within
500 ms, control requests are answered (a submit and a cancel with a Redis-down
refusal that changes nothing: the job still finishes; a Ping at once),
/metrics answers and shows cgq_redis_connected 0 and the probes counting.
After SIGCONT the job finishes with every trial run exactly once."""

import os
import re
import signal
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import heartbeat_rtt as harness_rtt  # noqa: E402
from harness import (CgqTestCase, ZmtpPeer, endpoint_port, free_port, main,  # noqa: E402
                     pb_envelope, pb_int, pb_submit)

N = 10
OUTAGE_S = 8.0       # several reconnect tries (each one used to block up to 2 s)
LIMIT_S = 0.5        # a heartbeat's round trip while Redis does not answer


def metric(body, name):
    m = re.search(r"^%s (\S+)$" % re.escape(name), body, re.M)
    return float(m.group(1)) if m else None


class RedisBlackholeTest(CgqTestCase):
    def test_loop_never_waits_on_a_stopped_redis(self):
        c = self.cluster
        c.start_redis()
        mport = free_port()
        c.start_coordinator(extra=("--metrics", "127.0.0.1:%d" % mport, "--durable-after", "0"))
        c.start_worker("w1", cpus=2)
        spec = c.write_counted_job("blackhole", N, 0.3)
        j = c.submit(spec)
        with open(spec) as f:
            submit = pb_submit(f.read(), spec, os.path.dirname(spec))
        c.wait_value(lambda: int(c.job(j).get("succeeded", "0")), lambda n: n >= 2, 30,
                     "two trials to finish")

        node = ZmtpPeer("127.0.0.1", endpoint_port(c.nodes_ep), identity=b"probe-peer", timeout=5)

        def heartbeat_rtt():
            return harness_rtt(node)

        def control(payload):
            peer = ZmtpPeer("127.0.0.1", endpoint_port(c.control_ep), socket_type=b"REQ",
                            timeout=5)
            try:
                t0 = time.monotonic()
                peer.send([b"", payload])
                frames = peer.recv()
                return time.monotonic() - t0, frames[-1]
            finally:
                peer.close(linger=0)

        def scrape():
            t0 = time.monotonic()
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=5) as r:
                body = r.read().decode()
            return time.monotonic() - t0, body

        self.assertLess(heartbeat_rtt(), LIMIT_S, "before the outage")
        # Heartbeats go on in a thread of their own, so that a stall of the
        # loop caused by anything the test does (a submit) shows in them.
        hb, stop = [], threading.Event()

        def beat():
            while not stop.is_set():
                hb.append(heartbeat_rtt())
                time.sleep(0.05)
        os.kill(c.redis_proc.pid, signal.SIGSTOP)
        beater = threading.Thread(target=beat)
        beater.start()
        ctl, http, refusals, bodies, pings, cancels = [], [], [], [], [], []
        ping = pb_envelope(34, b"")
        cancel = pb_envelope(32, pb_int(1, j))
        try:
            end = time.monotonic() + OUTAGE_S
            k = 0
            while time.monotonic() < end:
                if k % 5 == 0:
                    # A submit is refused at once while Redis takes no
                    # writes, and so is a cancel (nothing changed that is
                    # not in Redis); a Ping is answered at once.
                    dt, reply = control(submit)
                    ctl.append(dt)
                    refusals.append(reply)
                    dt, reply = control(ping)
                    ctl.append(dt)
                    pings.append(reply)
                    dt, reply = control(cancel)
                    ctl.append(dt)
                    cancels.append(reply)
                    dt, body = scrape()
                    http.append(dt)
                    bodies.append(body)
                k += 1
                time.sleep(0.1)
        finally:
            stop.set()
            beater.join(10)
            os.kill(c.redis_proc.pid, signal.SIGCONT)
        node.close(linger=0)
        print("while Redis was stopped for %.0f s: heartbeat round trip max %.0f ms (%d), control "
              "max %.0f ms (%d), /metrics max %.0f ms (%d)" % (
                  OUTAGE_S, 1000 * max(hb), len(hb), 1000 * max(ctl), len(ctl),
                  1000 * max(http), len(http)))
        self.assertLess(max(hb), LIMIT_S, "heartbeat round trips: %s" % hb)
        self.assertLess(max(ctl), LIMIT_S, "control round trips: %s" % ctl)
        self.assertLess(max(http), LIMIT_S, "/metrics round trips: %s" % http)
        self.assertTrue(all(b"Redis" in r for r in refusals[1:]), refusals)
        self.assertTrue(pings and all(b"epoch " in r for r in pings), pings)
        self.assertTrue(all(b"takes no writes now" in r and b"the job was not cancelled" in r
                            for r in cancels[1:]), cancels)
        last = bodies[-1]
        self.assertEqual(metric(last, "cgq_redis_connected"), 0.0, last)
        self.assertGreaterEqual(metric(last, "cgq_redis_connect_probes_total"), 2, last)

        job = c.wait_job(j, 60)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), str(N), job)
        for t, h in c.trials(j).items():
            self.assertEqual((h.get("state"), h.get("attempt")), ("succeeded", "1"),
                             "trial %d: %s" % (t, h))
        ok = [int(e["trial"]) for e in c.events(j) if e.get("type") == "trial.succeeded"]
        self.assertEqual(sorted(ok), list(range(N)))
        self.assertEqual(c.counted_runs(), [(t, 1) for t in range(N)], "each trial ran once")
        _, body = scrape()
        self.assertEqual(metric(body, "cgq_redis_connected"), 1.0, body)
        with open(c.coordinator.err_path) as f:
            log = f.read()
        self.assertIn("answers again", log)


if __name__ == "__main__":
    main()
