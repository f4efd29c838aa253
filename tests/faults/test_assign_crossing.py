#!/usr/bin/env python3
"""A Hello or a heartbeat that crossed an Assign on the wire does not lose
the task; a task really gone is found lost.

A node speaks the protocol from Python here (tests/integration/fakerunner.py's
ZMTP and protobuf pieces), so that each message can be sent at the exact
moment a fault would send it:

  A. the node's Hello left before the Assign arrived (a reconnect after a
     coordinator stall): the trial stays running, attempt 1, nothing lost;
  B. a heartbeat that has seen the Assign but does not list the task (and no
     Result came before it): lost, run again as attempt 2;
  C. heartbeats that never see the next Assign (lost in a reconnect): after
     three of them it is sent again as it was, and runs; when the repeat is
     not seen either, three more make it lost, run again;
  D. a Hello from another process with the same id (the worker restarted):
     what it does not list is lost, even an Assign it has not seen.
"""

import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import CgqTestCase, main  # noqa: E402
from fakerunner import (ASSIGN, HEARTBEAT, HELLO, RESULT, STOP, TASK_SUCCEEDED, WELCOME,  # noqa: E402
                        Zmtp, _one, envelope, pb_bytes, pb_decode, pb_double, pb_int, task_ref)

SPEC = '''name: crossing
space:
  i: {grid: [0, 1]}
objective: {metric: v, mode: max}
trial:
  command: "true"
  resources: {cpu: 1}
'''


class FakeWorker:
    """One DEALER, driven message by message by the test."""

    def __init__(self, endpoint, rid):
        host, port = endpoint.replace("tcp://", "").rsplit(":", 1)
        self.rid = rid
        self.z = Zmtp(host, int(port), rid.encode())
        self.z.s.settimeout(10)

    def hello(self, instance, seen, running=()):
        res = pb_double(1, 1.0) + pb_int(2, 1 << 30)
        body = (pb_bytes(1, self.rid) + pb_bytes(3, res) +
                b"".join(pb_bytes(4, task_ref(*r)) for r in running) +
                pb_bytes(6, "fake") + pb_int(7, os.getpid()) + pb_int(9, instance) +
                pb_int(10, seen[0]) + pb_int(11, seen[1]))
        self.z.send(envelope(HELLO, body))

    def heartbeat(self, seen, running=()):
        body = (b"".join(pb_bytes(1, task_ref(*r)) for r in running) +
                pb_int(4, seen[0]) + pb_int(5, seen[1]))
        self.z.send(envelope(HEARTBEAT, body))

    def result(self, ref, value):
        body = (pb_bytes(1, task_ref(*ref)) + pb_int(2, TASK_SUCCEEDED) +
                pb_bytes(3, json.dumps({"v": value})) + pb_double(6, 0.01))
        self.z.send(envelope(RESULT, body))

    def next(self, want, timeout=10):
        """The next message with body `want` (skipping heartbeat answers,
        Welcomes, Acks); fails on a Stop unless a Stop is wanted."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            env = pb_decode(self.z.recv()[-1])
            if want in env:
                return pb_decode(_one(env, want))
            if STOP in env and want != STOP:
                raise AssertionError("unexpected Stop: %r" % pb_decode(_one(env, STOP)))
        raise AssertionError("no message %d within %ss" % (want, timeout))

    def assign(self):
        a = self.next(ASSIGN)
        t = pb_decode(_one(a, 1))
        return (_one(t, 1, 0), _one(t, 2, 0), _one(t, 4, 0)), (_one(a, 20, 0), _one(a, 19, 0))


class AssignCrossingTest(CgqTestCase):
    def test_crossed_assigns_are_kept_lost_ones_are_found(self):
        c = self.cluster
        c.start_redis()
        # 1 s heartbeats x 5: the test has time to send what it wants.
        c.start_coordinator(heartbeat="1s")
        j = c.submit(c.write_file("crossing.yaml", SPEC))
        me = random.getrandbits(63) | 1
        w = FakeWorker(c.nodes_ep, "fw")
        w.hello(me, (0, 0))
        w.next(WELCOME)
        ref, at = w.assign()
        self.assertEqual(ref[2], 1, "first attempt")
        self.assertGreater(at[1], 0, "an Assign carries its seq")

        def trial_state():
            h = c.trials(j)[ref[1]]
            return h.get("state"), h.get("attempt")

        # A: a Hello sent before that Assign arrived (it lists nothing).
        w.hello(me, (0, 0))
        w.next(WELCOME)
        for _ in range(3):
            w.heartbeat(at, [ref])
            time.sleep(0.2)
        self.assertEqual(trial_state(), ("running", "1"))
        self.assertEqual([e for e in c.events(j) if e.get("type") == "trial.lost"], [],
                         "a Hello that crossed the Assign loses nothing")

        # B: the Assign was seen, the task is not running, no Result came.
        w.heartbeat(at, [])
        ref2, at2 = w.assign()
        self.assertEqual((ref2[1], ref2[2]), (ref[1], 2), "run again as attempt 2")
        self.assertGreater(at2[1], at[1])
        lost = [e for e in c.events(j) if e.get("type") == "trial.lost"]
        self.assertEqual(len(lost), 1, lost)
        self.assertIn("no longer runs it", lost[0].get("detail", ""), lost)

        # C: heartbeats that never see attempt 2's Assign: after three it is
        # sent again as it was (same attempt, same seq); this time it arrives
        # and runs, and nothing is lost.
        for i in range(3):
            self.assertEqual(trial_state(), ("running", "2"), "still waiting after %d" % i)
            w.heartbeat(at, [])
            time.sleep(0.2)
        again, at_again = w.assign()
        self.assertEqual(again, ref2, "the same attempt again")
        self.assertEqual(at_again, at2, "with the same seq")
        w.heartbeat(at2, [ref2])
        time.sleep(0.3)
        self.assertEqual(trial_state(), ("running", "2"))
        lost = [e for e in c.events(j) if e.get("type") == "trial.lost"]
        self.assertEqual(len(lost), 1, lost)
        w.result(ref2, 2)

        # C': the second trial's Assign never arrives, nor its repeat: after
        # three heartbeats more it is lost and runs again as attempt 2.
        ref4, at4 = w.assign()
        self.assertNotEqual(ref4[1], ref[1])
        for _ in range(3):
            w.heartbeat(at2, [])
            time.sleep(0.2)
        again4, at4_again = w.assign()
        self.assertEqual((again4, at4_again), (ref4, at4))
        for _ in range(3):
            w.heartbeat(at2, [])
            time.sleep(0.2)
        ref5, at5 = w.assign()
        self.assertEqual((ref5[1], ref5[2]), (ref4[1], 2), "run again as attempt 2")
        lost = [e for e in c.events(j) if e.get("type") == "trial.lost"]
        self.assertEqual(len(lost), 2, lost)
        self.assertIn("never reached", lost[1].get("detail", ""), lost)

        # D: a new process with the same id says Hello without it and
        # without having seen its Assign.
        w.hello(me + 2, (0, 0))
        w.next(WELCOME)
        ref6, _ = w.assign()
        self.assertEqual((ref6[1], ref6[2]), (ref4[1], 3), "a restarted node ran nothing")
        lost = [e for e in c.events(j) if e.get("type") == "trial.lost"]
        self.assertEqual(len(lost), 3, lost)
        self.assertIn("restarted without it", lost[2].get("detail", ""), lost)
        w.result(ref6, 5)

        job = c.wait_job(j, 20)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "2", job)
        states = {t: (h.get("state"), h.get("attempt")) for t, h in c.trials(j).items()}
        self.assertEqual(states, {ref[1]: ("succeeded", "2"), ref4[1]: ("succeeded", "3")})
        ok = [e for e in c.events(j) if e.get("type") == "trial.succeeded"]
        self.assertEqual(len(ok), 2, "each trial recorded once: %r" % ok)


if __name__ == "__main__":
    main()
