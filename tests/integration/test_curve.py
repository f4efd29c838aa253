#!/usr/bin/env python3
"""CURVE on the coordinator's sockets (docs/security.md).

Keys come from `cgq keygen`. With an allow-list holding the keys of one
worker and one CLI user: that worker registers and runs a job submitted by
that user; a worker with another key never registers (the coordinator logs
and counts the refusal, the worker says which key to allow); a CLI with
another key, or none, is refused at once with what to configure. Protected
mode: a non-loopback bind without keys does not start. Keys are bound to
node ids: an allowed key claiming another node's id is refused, logged with
key and address, and counted (refused_node_ids), and cannot take a live
node's connection. Peers without CURVE, or with another server key, are
logged with their address, at most 10 lines a second however many come.
On the wire
(loopback, captured with an AF_PACKET socket, root only): with CURVE no param
value appears in the coordinator's traffic; without it, it does (so the
capture can fail).
"""

import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (CgqTestCase, binary, endpoint_port, main, metrics_of, params_of,  # noqa: E402
                     open_files_at_least, read_text)

MARKER = "zebra7741quokka"  # a param value: must never cross the wire in clear with CURVE

TRIAL = r'''
import json, os, sys
p = json.loads(os.environ["CGQ_PARAMS"])
with os.fdopen(3, "w") as f:
    f.write(json.dumps({"score": p["x"] * 2, "tag_len": len(p["tag"])}) + "\n")
'''

SPEC = '''name: curve
space:
  x: {grid: [1, 2, 3, 4]}
  tag: %s
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/trial.py --tag {tag}
  resources: {cpu: 1}
  timeout: 1m
''' % MARKER


class Capture:
    """Payload bytes of TCP segments on lo to or from the given ports, read
    with a raw AF_PACKET socket (needs root) in a thread."""

    def __init__(self):
        self.ports = set()
        self.data = bytearray()
        self.segments = 0
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.sock.bind(("lo", 0))
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            try:
                frame, addr = self.sock.recvfrom(1 << 17)
            except socket.timeout:
                continue
            except OSError:
                return
            if addr[2] == socket.PACKET_OUTGOING:  # lo shows each packet twice
                continue
            if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 6:
                continue  # IPv4 + TCP only
            ihl = (frame[14] & 0x0F) * 4
            tcp = 14 + ihl
            sport, dport = struct.unpack(">HH", frame[tcp:tcp + 4])
            if sport not in self.ports and dport not in self.ports:
                continue
            doff = (frame[tcp + 12] >> 4) * 4
            total = struct.unpack(">H", frame[16:18])[0]
            payload = frame[tcp + doff:14 + total]
            if payload:
                self.segments += 1
                self.data += payload

    def close(self):
        self.stop.set()
        self.thread.join(5)
        self.sock.close()


def can_capture():
    if os.geteuid() != 0:
        return "capturing loopback traffic needs root (AF_PACKET)"
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003)).close()
    except OSError as e:
        return "no AF_PACKET socket here: %s" % e
    return None


class CurveTest(CgqTestCase):
    def keygen(self, name, nodes=None):
        d = os.path.join(self.tmp, "keys")
        r = subprocess.run([binary("cgq"), "keygen", name, "--dir", d]
                           + (["--nodes", nodes] if nodes else []), capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        pub, sec = os.path.join(d, name + ".key"), os.path.join(d, name + ".key_secret")
        self.assertEqual(os.stat(sec).st_mode & 0o777, 0o600, "the secret file is 0600")
        key = r.stdout.split("(key ", 1)[1][:40]  # Z85: may itself hold ')'
        self.assertEqual(len(key), 40, r.stdout)
        return pub, sec, key

    def curve_cluster(self):
        c = self.cluster
        self.coord_pub, self.coord_sec, _ = self.keygen("coordinator")
        self.good = self.keygen("worker-good", nodes="good")
        self.bad = self.keygen("worker-bad")
        self.alice = self.keygen("alice", nodes="none")  # a user's key: no node id
        self.mallory = self.keygen("mallory")
        self.other = self.keygen("other")  # allowed; may claim other and other-*
        allow = os.path.join(self.tmp, "allow")
        os.makedirs(allow)
        for pub, _, _ in (self.good, self.alice, self.other):
            with open(pub) as src, open(os.path.join(allow, os.path.basename(pub)), "w") as dst:
                dst.write(src.read())
        c.start_redis()
        c.start_coordinator(extra=("--curve-secret", self.coord_sec, "--curve-allow", allow))
        return c

    def worker_keys(self, who):
        return ("--curve-secret", who[1], "--curve-server", self.coord_pub)

    def cli_env(self, who):
        env = self.cluster.cli_env()
        if who:
            env.update(CGQ_CURVE_SECRET=who[1], CGQ_CURVE_SERVER=self.coord_pub)
        return env

    def test_known_keys_work_unknown_keys_are_refused(self):
        c = self.curve_cluster()
        c.start_worker("good", cpus=2, extra=self.worker_keys(self.good))
        bad = c.start_worker("bad", cpus=2, extra=self.worker_keys(self.bad) + (
            "--heartbeat", "200ms"), wait=False)
        nokey = c.start_worker("nokey", cpus=2, extra=("--heartbeat", "200ms"), wait=False)

        c.write_file("trial.py", TRIAL)
        spec = c.write_file("curve.yaml", SPEC)
        r = c.cgq("submit", spec, env=self.cli_env(self.alice))
        self.assertEqual(r.returncode, 0, r.stderr)
        jobs = c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1)
        self.assertEqual(len(jobs), 1, jobs)
        j = int(jobs[0])
        job = c.wait_job(j, 60)
        self.assertEqual((job.get("state"), job.get("succeeded")), ("finished", "4"), job)
        for t, h in c.trials(j).items():
            self.assertEqual(h.get("node"), "good", h)
            self.assertEqual(metrics_of(h)["score"], params_of(h)["x"] * 2, h)

        # the refused workers never registered, and said why
        c.wait_for(lambda: "no Welcome" in read_text(bad.err_path)
                   and "no Welcome" in read_text(nokey.err_path), 20,
                   "the refused workers to log their hint")
        for wid in ("bad", "nokey"):
            self.assertEqual(c.redis.hgetall("cgq:node:" + wid), {}, "%s registered" % wid)
            self.assertFalse(c.redis.cmd("SISMEMBER", "cgq:nodes", wid))
        self.assertIn(self.bad[2], read_text(bad.err_path), "the worker names its key")
        self.assertIn("give this node --curve-secret", read_text(nokey.err_path))
        clog = read_text(c.coordinator.err_path)
        self.assertIn("refused a peer from 127.0.0.1", clog)
        self.assertIn(self.bad[2], clog, "the coordinator names the refused key")
        c.wait_for(lambda: int(c.redis.hgetall("cgq:coordinator").get("refused_peers") or 0) >= 1,
                   10, "refused_peers to be counted")

        # CLI: an unknown key and no key fail at once, exit 2, saying what to set
        for who, expect in ((self.mallory, "refused this CLI's CURVE key " + self.mallory[2]),
                            (None, "requires CURVE authentication")):
            r = c.cgq("cancel", j, env=self.cli_env(who), timeout=20)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(expect, r.stderr)
            self.assertLess(r.elapsed, 4, "refused at once, not after the 5 s timeout")
        self.assertEqual(c.job(j).get("state"), "finished", "nothing changed")
        # alice is still welcome
        r = c.cgq("cancel", j, env=self.cli_env(self.alice))
        self.assertNotIn("CURVE", r.stderr)
        self.assertIn("already", (r.stdout + r.stderr).lower())

    def test_keys_are_bound_to_node_ids(self):
        c = self.curve_cluster()
        good = c.start_worker("good", cpus=2, extra=self.worker_keys(self.good))
        # an allowed key, claiming an id it is not bound to: refused, and told why
        victim = c.start_worker("victim", cpus=2, extra=self.worker_keys(self.other) + (
            "--heartbeat", "200ms"), wait=False)
        # the same key, claiming the live worker's id: ZeroMQ keeps the id
        # with the connection that holds it, so good's work is not diverted
        thief = c.start_worker("good", cpus=2, extra=self.worker_keys(self.other) + (
            "--heartbeat", "200ms"), wait=False)
        # the same key under an id it is bound to: works (name and name-*)
        c.start_worker("other-7", cpus=1, extra=self.worker_keys(self.other))
        # a user's key (--nodes none) is no node at all, not even under its name
        user = c.start_worker("alice", cpus=1, extra=self.worker_keys(self.alice) + (
            "--heartbeat", "200ms"), wait=False)

        c.wait_for(lambda: "refused node id 'victim'" in read_text(victim.err_path), 20,
                   "the refused worker to log the coordinator's reason")
        self.assertIn("may claim node ids 'other,other-*' only", read_text(victim.err_path))
        c.wait_for(lambda: "refused node id 'alice'" in read_text(user.err_path), 20,
                   "the user's key to be refused as a node")
        self.assertIn("may claim node ids '(none: a CLI key)' only", read_text(user.err_path))
        clog = read_text(c.coordinator.err_path)
        self.assertRegex(clog, r"refused a hello claiming node id 'victim' from 127\.0\.0\.1: "
                         r"its CURVE key %s may claim node ids 'other,other-\*' only"
                         % re.escape(self.other[2]))
        c.wait_for(lambda: int(c.redis.hgetall("cgq:coordinator").get("refused_node_ids") or 0)
                   >= 1, 10, "refused_node_ids to be counted")
        self.assertEqual(c.redis.hgetall("cgq:node:victim"), {}, "victim registered")

        c.write_file("trial.py", TRIAL)
        spec = c.write_file("curve.yaml", SPEC)
        r = c.cgq("submit", spec, env=self.cli_env(self.alice))
        self.assertEqual(r.returncode, 0, r.stderr)
        j = int(c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1)[0])
        job = c.wait_job(j, 60)
        self.assertEqual((job.get("state"), job.get("succeeded")), ("finished", "4"), job)
        nodes = {h.get("node") for h in c.trials(j).values()}
        self.assertLessEqual(nodes, {"good", "other-7"}, nodes)
        node = c.redis.hgetall("cgq:node:good")
        self.assertEqual((node.get("state"), node.get("pid")), ("alive", str(good.pid)),
                         "the id 'good' still belongs to the good worker")
        self.assertTrue(good.alive() and thief.alive())

    def test_keyless_peers_are_logged_with_their_address(self):
        c = self.curve_cluster()
        # a worker without keys, and one with another coordinator's public key
        c.start_worker("nokey", cpus=1, extra=("--heartbeat", "200ms"), wait=False)
        c.start_worker("wrongserver", cpus=1, extra=(
            "--curve-secret", self.good[1], "--curve-server", self.mallory[0],
            "--heartbeat", "200ms"), wait=False)
        port = endpoint_port(c.nodes_ep)
        # The address is read from the accepted connection by the watcher
        # thread; a peer that fails within microseconds may be gone by then
        # (logged as "an address that closed ..."), but a worker retries, and
        # its next attempts are logged with their address.
        keyless = re.compile(r"refused a peer from 127\.0\.0\.1:\d+ on the node socket: it "
                             r"does not use CURVE")
        wrong_key = re.compile(r"refused a peer from 127\.0\.0\.1:\d+ on the node socket: its "
                               r"CURVE handshake does not decrypt")
        c.wait_for(lambda: keyless.search(read_text(c.coordinator.err_path))
                   and wrong_key.search(read_text(c.coordinator.err_path)), 30,
                   "the keyless and the wrong-server-key peers to be logged with an address")
        clog = read_text(c.coordinator.err_path)
        self.assertRegex(clog, r"refused a peer from 127\.0\.0\.1:\d+ on the node socket: it "
                         r"does not use CURVE")
        self.assertRegex(clog, r"refused a peer from 127\.0\.0\.1:\d+ on the node socket: its "
                         r"CURVE handshake does not decrypt")
        # a flood of 300 keyless greetings: counted, at most 10 lines a second logged
        before = len(read_text(c.coordinator.err_path).splitlines())
        greeting = (b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL" + b"\0" * 16
                    + b"\0" + b"\0" * 31)
        t0 = time.monotonic()
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(greeting)
            try:
                while s.recv(4096):
                    pass
            except OSError:
                pass
            s.close()
        took = time.monotonic() - t0
        c.wait_for(lambda: int(c.redis.hgetall("cgq:coordinator").get("refused_peers") or 0)
                   >= 300, 20, "the 300 keyless peers to be counted")
        time.sleep(1.2)
        lines = read_text(c.coordinator.err_path).splitlines()[before:]
        logged = [l for l in lines if "it does not use CURVE" in l]
        self.assertLessEqual(len(logged), 10 * (int(took) + 3), "rate-limited: %d lines in %.1f s"
                             % (len(logged), took))
        self.assertTrue(any("more peer(s) on the node socket without logging each" in l
                            for l in lines), "the unlogged ones are summed up")
        self.assertTrue(c.coordinator.alive())

    def test_refusals_name_the_right_address(self):
        """A failed handshake is logged with its own peer's address, never
        with a later peer's that took over its descriptor: keyless peers from
        127.0.0.2 fail at once, and between them peers from 127.0.0.3 connect
        and stay (a partial greeting), each likely on the number the last
        failure freed. A watcher that read the address late named the
        127.0.0.3 peer for the 127.0.0.2 failure (7 of 100 lines under ASan,
        before the fix)."""
        c = self.curve_cluster()
        port = endpoint_port(c.nodes_ep)
        greeting = (b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL" + b"\0" * 16
                    + b"\0" + b"\0" * 31)
        held = []
        try:
            for i in range(100):
                bad = socket.socket()
                bad.bind(("127.0.0.2", 0))
                bad.settimeout(5)
                bad.connect(("127.0.0.1", port))
                bad.sendall(greeting)
                try:
                    while bad.recv(4096):
                        pass
                except OSError:
                    pass
                bad.close()
                stay = socket.socket()
                stay.bind(("127.0.0.3", 0))
                stay.connect(("127.0.0.1", port))
                stay.sendall(greeting[:10])  # the signature: its handshake waits
                held.append(stay)
                if i % 20 == 19:
                    time.sleep(1.05)  # a new second: ten more refusals are logged
            c.wait_for(lambda: int(c.redis.hgetall("cgq:coordinator").get("refused_peers") or 0)
                       >= 100, 20, "the 100 keyless peers to be counted")
            lines = [l for l in read_text(c.coordinator.err_path).splitlines()
                     if "refused a peer from" in l]
            self.assertTrue(any("from 127.0.0.2:" in l for l in lines), lines[:5])
            self.assertEqual([l for l in lines if "127.0.0.3" in l], [],
                             "a refusal named a peer that was not refused")
        finally:
            for s in held:
                s.close()

    def test_refusals_past_descriptor_1024_are_named(self):
        """A coordinator of thousands of nodes holds descriptors past 1024:
        a peer refused there is logged with its address too."""
        if not open_files_at_least(self, 1300):  # 1,100 sockets here
            return
        c = self.curve_cluster()
        port = endpoint_port(c.nodes_ep)
        idle = []
        try:
            for _ in range(1100):  # accepted, waiting for a greeting
                idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            c.wait_for(lambda: len(os.listdir("/proc/%d/fd" % c.coordinator.pid)) > 1100, 20,
                       "the coordinator to accept 1100 connections")
            bad = socket.socket()
            bad.bind(("127.0.0.2", 0))
            bad.settimeout(5)
            bad.connect(("127.0.0.1", port))
            # The signature, a pause (its address is read meanwhile), then
            # the rest of a NULL greeting: refused.
            bad.sendall(b"\xff" + b"\0" * 8 + b"\x7f")
            time.sleep(0.5)
            bad.sendall(b"\x03\x00" + b"NULL" + b"\0" * 48)
            c.wait_for(lambda: "refused a peer from" in read_text(c.coordinator.err_path), 20,
                       "the keyless peer to be logged")
            bad.close()
            line = [l for l in read_text(c.coordinator.err_path).splitlines()
                    if "refused a peer from" in l][0]
            self.assertIn("refused a peer from 127.0.0.2:", line)
        finally:
            for s in idle:
                s.close()

    def test_protected_mode(self):
        c = self.cluster
        c.start_redis()
        for bind in ("tcp://0.0.0.0:0", "tcp://*:0"):
            r = subprocess.run([binary("cgq-coordinator"), "--redis", c.redis_url, "--bind", bind,
                                "--control", "tcp://127.0.0.1:0"], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("refusing to bind %s without authentication" % bind, r.stderr)
            self.assertIn("--curve-secret", r.stderr)
            self.assertIn("--insecure", r.stderr)
        r = subprocess.run([binary("cgq-coordinator"), "--redis", c.redis_url, "--curve-allow",
                            self.tmp], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("CURVE needs both --curve-secret", r.stderr)

    def run_and_capture(self, curve):
        why = can_capture()
        if why:
            print("skipped: %s" % why, flush=True)
            self.skipTest(why)
        c = self.curve_cluster() if curve else self.cluster
        if not curve:
            c.start_redis()
            c.start_coordinator()
        cap = Capture()
        cap.ports = {endpoint_port(c.nodes_ep), endpoint_port(c.control_ep)}
        try:
            c.start_worker("good", cpus=2, extra=self.worker_keys(self.good) if curve else ())
            c.write_file("trial.py", TRIAL)
            spec = c.write_file("curve.yaml", SPEC)
            r = c.cgq("submit", spec, env=self.cli_env(self.alice if curve else None))
            self.assertEqual(r.returncode, 0, r.stderr)
            j = int(c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1)[0])
            job = c.wait_job(j, 60)
            self.assertEqual(job.get("succeeded"), "4", job)
            time.sleep(0.3)
        finally:
            cap.close()
        self.assertGreater(cap.segments, 10, "traffic was captured")
        return bytes(cap.data)

    def test_wire_is_encrypted_with_curve(self):
        data = self.run_and_capture(True)
        self.assertNotIn(MARKER.encode(), data, "a param value crossed the wire in clear")
        self.assertNotIn(b"score", data)

    def test_wire_is_plain_without_curve(self):
        data = self.run_and_capture(False)
        self.assertIn(MARKER.encode(), data, "the capture sees plaintext (else it proves nothing)")


if __name__ == "__main__":
    main()
