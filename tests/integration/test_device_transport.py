#!/usr/bin/env python3
"""Device transports (device-runner/transport.c), against a real board
stand-in each:

- ssh: a REAL sshd (Debian's openssh-server), started by this test as its
  own process with a generated host key and user key, AuthorizedKeysFile in
  the test's directory, root by key only. As root, the whole test re-runs
  itself inside a network namespace it creates (unshare -n, lo up), so sshd
  listens on a loopback no one else shares; where unshare is refused it
  runs on the host's loopback (the test prints which). Not root, or no
  sshd: skipped with the reason (exit 77).
- adb: no phone here, so a fake `adb` (Python, on PATH) that answers
  `-s SERIAL push/shell/pull/get-state` as adb does, exit codes included,
  and can be switched to "error: device offline".

Cases on each: push + measure (the time comes from the board's timer), a
second measurement is a cache hit (no push), the board's cache evicts past
cache_max, the board dropping mid-run fails that measurement with the
transport's own error (ssh's exit 255 / adb's "device offline") and
`check` fails while it is down, and when it is back `check` passes and the
device measures again. Measurements go through `cgq-device-runner measure`,
the process the runner forks for each task (whose failed/timeout results
the coordinator counts toward quarantine, tests/integration/
test_device_quarantine.py)."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))

if __name__ == "__main__" and os.geteuid() == 0 and not os.environ.get("CGQ_TEST_NETNS"):
    env = dict(os.environ, CGQ_TEST_NETNS="1")
    ok = subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0
    if ok:
        os.execvpe("unshare", ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"',
                               "sh", sys.executable] + sys.argv, env)
    os.environ["CGQ_TEST_NETNS"] = "refused"

sys.path.insert(0, HERE)
from harness import CgqTestCase, Proc, binary, free_port, main, metrics_of  # noqa: E402

SSHD = "/usr/sbin/sshd"
BENCH = "#!/bin/sh\nsleep 0.05\necho ran-on-board\n"
# Two busy processes of fixed work (a multi-threaded benchmark's shape).
TWO_BUSY = ("awk 'BEGIN{for(i=0;i<6000000;i++);}' & awk 'BEGIN{for(i=0;i<6000000;i++);}' & "
            "wait")

FAKE_ADB = r'''#!/usr/bin/env python3
import os, shutil, subprocess, sys, time
state = os.environ["FAKE_ADB_DIR"]
a = sys.argv[1:]
if len(a) < 3 or a[0] != "-s":
    sys.stderr.write("adb: usage: adb -s SERIAL COMMAND\n"); sys.exit(1)
serial, cmd, rest = a[1], a[2], a[3:]
if serial != open(os.path.join(state, "serial")).read().strip():
    sys.stderr.write("error: device '%s' not found\n" % serial); sys.exit(1)
if os.path.exists(os.path.join(state, "offline")):
    sys.stderr.write("error: device offline\n"); sys.exit(1)
with open(os.path.join(state, "log"), "a") as f:
    f.write(cmd + "\n")
if cmd == "get-state":
    print("device"); sys.exit(0)
if cmd == "push" and len(rest) == 2:
    shutil.copyfile(rest[0], rest[1])
    print("%s: 1 file pushed." % rest[0]); sys.exit(0)
if cmd == "pull" and len(rest) == 2:
    shutil.copyfile(rest[0], rest[1]); sys.exit(0)
if cmd == "shell" and rest:
    time.sleep(float(os.environ.get("FAKE_ADB_LATENCY", "0")))  # the USB round trip
    line = " ".join(rest)
    if os.environ.get("FAKE_ADB_NO_PROC"):  # a board whose shell cannot read /proc/$$/stat
        line = line.replace("/proc/$$/stat", "/nonexistent/stat")
    sys.exit(subprocess.run(["/bin/sh", "-c", line]).returncode)
sys.stderr.write("adb: unknown command %s\n" % cmd); sys.exit(1)
'''


def descendants(pid):
    kids = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


class TransportBase(unittest.TestCase):
    def setUp(self):
        self.runner = binary("cgq-device-runner")
        self.dir = tempfile.mkdtemp(prefix="cgq-transport-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.workdir = os.path.join(self.dir, "w")
        os.makedirs(self.workdir)
        self.board = os.path.join(self.dir, "board")

    def artifact(self, name, text):
        p = os.path.join(self.dir, name)
        with open(p, "w") as f:
            f.write(text)
        return "file://" + p, hashlib.sha256(text.encode()).hexdigest()

    def write_config(self, transport, cache_max=1 << 20):
        self.transport = transport
        cfg = os.path.join(self.dir, "runner.yaml")
        with open(cfg, "w") as f:
            f.write("""devices:
  - id: board
    env: {BOARD_GREETING: "it's me"}
    check: test "$BOARD_GREETING" = "it's me" && test -d /proc
    transport:
      %s
benchmarks:
  run-script:
    command: sh {artifact}
    timing: per-run
    warmup: 1
    repeats: 3
    timeout: 20s
""" % transport.replace("CACHE_MAX", str(cache_max)))
        self.cfg = cfg

    def measure(self, url, sha):
        p = subprocess.run([self.runner, "measure", "--config", self.cfg, "--device", "board",
                            "--benchmark", "run-script", "--artifact", url, "--sha256", sha,
                            "--workdir", self.workdir], capture_output=True, text=True,
                           timeout=90, env=self.env)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        self.assertEqual(len(lines), 1, "one JSON line: %r %r" % (p.stdout, p.stderr))
        return json.loads(lines[0])

    def cache_files(self):
        d = os.path.join(self.board, "cache")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def check_measured(self, r, pushed):
        self.assertEqual(r["status"], "succeeded", r)
        m = r["metrics"]
        self.assertEqual(m["artifact_pushed"], pushed, m)
        self.assertEqual(m["runs"], 3, m)
        # The board's timer: the 50 ms sleep and a little, not the
        # transport's round trip (ssh's start-up alone is several ms).
        self.assertGreaterEqual(m["min_ms"], 50, m)
        self.assertLess(m["p50_ms"], 1000, m)
        self.assertNotIn("peak_rss_kb", m, "the transport client's RSS is not the board's")
        # The board's load sampled on the board, through the transport
        # (test_measure_noise.py tests what it judges).
        self.assertIn("interference_busy", m, m)
        # The runs' own CPU time is the board's account (the shell's
        # /proc/$$/stat), not their wall time: a sleeping benchmark uses
        # next to none of it.
        self.assertEqual(m["interference_own"], "board", m)
        self.assertLess(m["interference_own_s"], 0.5 * sum(m["samples_ms"]) / 1e3, m)


class SshdBoard:
    """A real sshd as the board: self.dir holds its keys and config."""

    def setup_sshd(self):
        if os.geteuid() != 0:
            self.skipTest("the ssh transport test runs sshd as root (the tests' CI user)")
        if not os.access(SSHD, os.X_OK) or not shutil.which("ssh"):
            self.skipTest("needs openssh-server and openssh-client (scripts/bootstrap)")
        print("sshd runs on %s" % ("a network namespace of this test's own"
                                    if os.environ.get("CGQ_TEST_NETNS") == "1"
                                    else "the host's loopback (unshare -n refused)"),
              file=sys.stderr)
        d = self.dir
        for name in ("host", "user"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            os.path.join(d, name)], check=True)
        shutil.copyfile(os.path.join(d, "user.pub"), os.path.join(d, "authorized_keys"))
        self.port = free_port()
        with open(os.path.join(d, "host.pub")) as f:
            hostpub = f.read().split()
        with open(os.path.join(d, "known_hosts"), "w") as f:
            f.write("[127.0.0.1]:%d %s %s\n" % (self.port, hostpub[0], hostpub[1]))
        with open(os.path.join(d, "sshd_config"), "w") as f:
            f.write("""Port %d
ListenAddress 127.0.0.1
HostKey %s/host
PidFile %s/sshd.pid
AuthorizedKeysFile %s/authorized_keys
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
Subsystem sftp /usr/lib/openssh/sftp-server
""" % (self.port, d, d, d))
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        self.sshd = None
        self.start_sshd()
        self.addCleanup(self.stop_sshd)
        self.ssh_transport = """ssh: {host: 127.0.0.1, port: %d, user: root, key: %s/user,
             known_hosts: %s/known_hosts, dir: %s, cache_max: CACHE_MAX,
             connect_timeout: 3}""" % (self.port, d, d, self.board)

    def start_sshd(self):
        with open(os.path.join(self.dir, "sshd.log"), "a") as log:
            self.sshd = subprocess.Popen([SSHD, "-D", "-e", "-f",
                                          os.path.join(self.dir, "sshd_config")], stderr=log)
        deadline = time.monotonic() + 10
        import socket
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        self.fail("sshd did not listen: %s" % open(os.path.join(self.dir, "sshd.log")).read())

    def stop_sshd(self):
        """sshd and every connection it serves (their processes, by PID)."""
        if not self.sshd or self.sshd.poll() is not None:
            return
        for p in [self.sshd.pid] + descendants(self.sshd.pid):
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.sshd.wait(10)



class SshTransportTest(SshdBoard, TransportBase):
    def setUp(self):
        TransportBase.setUp(self)
        self.setup_sshd()
        self.env = dict(os.environ)
        self.write_config(self.ssh_transport)
        self.addCleanup(self.close_master)

    def close_master(self):
        sock = os.path.join(self.workdir, "ssh-board.sock")
        if os.path.exists(sock):
            subprocess.run(["ssh", "-o", "ControlPath=" + sock, "-O", "exit", "x"],
                           capture_output=True, timeout=10)

    def test_two_busy_processes_counted_on_the_board(self):
        """Over ssh (dash or bash as the user's shell) the board's account
        counts both processes of a two-process benchmark: about two CPUs'
        worth of its wall time, where the wall-time rule took one."""
        url, sha = self.artifact("two.sh", "#!/bin/sh\n" + TWO_BUSY + "\n")
        tries = []
        for _ in range(4):
            m = self.measure(url, sha)["metrics"]
            tries.append(m)
            self.assertEqual(m["interference_own"], "board", m)
            if m["interference_own_s"] > 1.5 * sum(m["samples_ms"]) / 1e3:
                return
            time.sleep(1)
        self.skipTest("this shared host never gave the benchmark two CPUs: %s"
                      % [(t["interference_own_s"], sum(t["samples_ms"]) / 1e3) for t in tries])

    def test_push_measure_cache_drop_and_return(self):
        url, sha = self.artifact("bench.sh", BENCH)
        r = self.measure(url, sha)
        self.check_measured(r, True)
        self.assertEqual(r["metrics"]["transport"], "ssh")
        self.assertEqual(self.cache_files(), [sha])
        sock = os.path.join(self.workdir, "ssh-board.sock")
        self.assertTrue(os.path.exists(sock), "one control connection, reused")
        self.check_measured(self.measure(url, sha), False)  # a cache hit: no transfer

        # The cache on the board keeps cache_max bytes: a second artifact
        # evicts the older one.
        self.write_config(self.transport, cache_max=len(BENCH))
        url2, sha2 = self.artifact("bench2.sh", BENCH + "# two\n")
        self.check_measured(self.measure(url2, sha2), True)
        self.assertEqual(self.cache_files(), [sha2])

        # The board drops in the middle of a run: that measurement fails
        # with ssh's own error.
        url3, sha3 = self.artifact("slow.sh", "#!/bin/sh\ntouch %s/running\nsleep 5\n"
                                   % self.dir)
        m = subprocess.Popen([self.runner, "measure", "--config", self.cfg, "--device", "board",
                              "--benchmark", "run-script", "--artifact", url3, "--sha256", sha3,
                              "--workdir", self.workdir], stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(os.path.join(self.dir, "running")) and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertTrue(os.path.exists(os.path.join(self.dir, "running")), "the run started")
        t0 = time.monotonic()
        self.stop_sshd()
        out, _ = m.communicate(timeout=30)
        r = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(r["status"], "failed", r)
        self.assertIn("warm-up run 1: exit status 255", r["error"])
        self.assertLess(time.monotonic() - t0, 4, "the drop ends the run, not its 5 s sleep")

        # Down: the next measurement fails at its check, with ssh's error.
        r = self.measure(url2, sha2)
        self.assertEqual(r["status"], "failed", r)
        self.assertIn("exit status 255", r["error"])
        self.assertRegex(r["error"], r"ssh: connect to host 127\.0\.0\.1 port \d+: Connection refused")
        self.assertIn("check", r["error"])
        # Back: check passes and it measures (pushing again: slow.sh took
        # the board's one-artifact cache), then from the cache.
        self.start_sshd()
        self.check_measured(self.measure(url2, sha2), True)
        self.assertEqual(self.cache_files(), [sha2])
        self.check_measured(self.measure(url2, sha2), False)


class SshQuarantineTest(SshdBoard, CgqTestCase):
    """The runner daemon and a real coordinator: a board that drops fails
    its trials with ssh's error until the device is quarantined; sshd back,
    `cgq devices enable` returns it and it measures again."""

    def setUp(self):
        CgqTestCase.setUp(self)
        self.dir = os.path.join(self.tmp, "b")
        os.makedirs(self.dir)
        self.board = os.path.join(self.dir, "board")
        self.setup_sshd()

    def tearDown(self):
        self.stop_sshd()  # before the harness looks for processes left behind
        CgqTestCase.tearDown(self)

    def test_drop_quarantines_and_enable_returns(self):
        c = self.start_default(workers=(), extra=("--quarantine-after", "2"))
        cfg = os.path.join(self.dir, "runner.yaml")
        with open(cfg, "w") as f:
            f.write("""devices:
  - id: board
    tags: {device: pi}
    check: test -d /proc
    transport:
      %s
benchmarks:
  sleepy:
    command: sleep 0.02
    timing: per-run
    repeats: 2
    timeout: 20s
""" % self.ssh_transport.replace("CACHE_MAX", "1000000"))
        # A short workdir: the control socket's path must fit a socket address.
        workdir = tempfile.mkdtemp(prefix="cgq-w-")
        self.addCleanup(shutil.rmtree, workdir, True)
        runner = Proc("r1", [binary("cgq-device-runner"), "--config", cfg, "--coordinator",
                             c.nodes_ep, "--id", "r1", "--workdir", workdir, "--heartbeat",
                             "200ms"], c.logdir)
        c.procs.append(runner)
        c.wait_for(lambda: c.redis.hgetall("cgq:node:r1").get("state") == "alive", 30, "r1")
        spec = """name: ssh-%s
space:
  i: {grid: %s}
search: {concurrency: 1}
trial:
  on: {device: pi}
  benchmark: sleepy
"""
        j = c.submit(c.write_file("a.yaml", spec % ("a", "[1, 2]")))
        c.wait_job(j, 60)
        ms = [metrics_of(t) for t in c.trials(j).values()]
        self.assertEqual([m.get("transport") for m in ms], ["ssh", "ssh"], ms)
        self.assertTrue(all(m["min_ms"] >= 20 for m in ms), ms)
        sock = os.path.join(workdir, "ssh-board.sock")
        self.assertTrue(os.path.exists(sock), "the control connection lives in the workdir")

        self.stop_sshd()
        j2 = c.submit(c.write_file("b.yaml", spec % ("b", "[1, 2, 3]")))
        c.wait_for(lambda: c.redis.hgetall("cgq:device:board").get("state") == "quarantined",
                   60, "board quarantined")
        # The second failure quarantined the board: that attempt is not charged
        # to its trial (docs/devices.md, "Quarantine"), which waits.
        failed = [t for t in c.trials(j2).values() if t.get("state") == "failed"]
        self.assertEqual(len(failed), 1, [t.get("error") for t in c.trials(j2).values()])
        for t in failed:
            self.assertIn("exit status 255", t.get("error", ""))
        self.assertIn("Connection refused", c.redis.hgetall("cgq:device:board")["last_error"])

        self.start_sshd()
        r = c.cgq("devices", "enable", "board")
        self.assertEqual(r.returncode, 0, r.stderr)
        c.wait_job(j2, 60)
        ok = [t for t in c.trials(j2).values() if t.get("state") == "succeeded"]
        self.assertEqual(len(ok), 2, "the second and third trials ran once the board was back")
        # The runner closes its control connection when it exits.
        problem = runner.stop()
        self.assertFalse(problem, problem)
        c.procs.remove(runner)
        self.assertFalse(os.path.exists(sock), "ssh -O exit at the runner's exit")


class AdbTransportTest(TransportBase):
    def setUp(self):
        super().setUp()
        bindir = os.path.join(self.dir, "bin")
        os.makedirs(bindir)
        adb = os.path.join(bindir, "adb")
        with open(adb, "w") as f:
            f.write("#!%s\n" % sys.executable + FAKE_ADB.split("\n", 1)[1])
        os.chmod(adb, 0o755)
        self.state = os.path.join(self.dir, "adbstate")
        os.makedirs(self.state)
        with open(os.path.join(self.state, "serial"), "w") as f:
            f.write("emulator-5554\n")
        self.env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"],
                        FAKE_ADB_DIR=self.state)
        self.write_config("adb: {serial: emulator-5554, dir: %s}" % self.board)

    def pushes(self):
        with open(os.path.join(self.state, "log")) as f:
            return f.read().split().count("push")

    def test_push_measure_cache_offline_and_back(self):
        url, sha = self.artifact("bench.sh", BENCH)
        r = self.measure(url, sha)
        self.check_measured(r, True)
        self.assertEqual(r["metrics"]["transport"], "adb")
        self.assertEqual(self.pushes(), 1)
        self.check_measured(self.measure(url, sha), False)
        self.assertEqual(self.pushes(), 1, "the second measurement pushed nothing")
        # A slow link (300 ms a command) is not in the samples: the board times.
        self.env["FAKE_ADB_LATENCY"] = "0.3"
        r = self.measure(url, sha)
        self.check_measured(r, False)
        self.assertLess(r["metrics"]["max_ms"], 250, r["metrics"])
        del self.env["FAKE_ADB_LATENCY"]

        open(os.path.join(self.state, "offline"), "w").close()
        r = self.measure(url, sha)
        self.assertEqual(r["status"], "failed", r)
        self.assertIn("error: device offline", r["error"])
        os.unlink(os.path.join(self.state, "offline"))
        self.check_measured(self.measure(url, sha), False)
        self.assertEqual(self.pushes(), 1)

    def test_failed_run_quotes_the_benchmark_not_the_timer(self):
        # The board's timer line comes after the benchmark's output; a failed
        # run's error must end with the benchmark's own last line.
        url, sha = self.artifact("fails.sh", "#!/bin/sh\necho 'model.tflite: bad magic' >&2\n"
                                 "exit 3\n")
        r = self.measure(url, sha)
        self.assertEqual(r["status"], "failed", r)
        self.assertIn("model.tflite: bad magic", r["error"])
        self.assertNotIn("cgq-board-ns", r["error"])
        self.assertNotIn("cgq-stat", r["error"])

    def test_cpus_pin_the_benchmark_on_the_board(self):
        # A benchmark's cpus: on a board, taskset -c there (the fake adb's
        # board is this machine, so the benchmark reads its own affinity).
        with open(self.cfg) as f:
            text = f.read()
        with open(self.cfg, "w") as f:
            f.write(text.replace("    timing: per-run\n", "    timing: per-run\n    cpus: \"0\"\n"))
        seen = os.path.join(self.dir, "affinity")
        url, sha = self.artifact("aff.sh", "#!/bin/sh\ngrep Cpus_allowed_list /proc/self/status"
                                 " >%s\nsleep 0.05\n" % seen)
        r = self.measure(url, sha)
        self.assertEqual(r["status"], "succeeded", r)
        with open(seen) as f:
            self.assertEqual(f.read().split(), ["Cpus_allowed_list:", "0"])

    def test_sdb_missing_is_refused_at_start(self):
        # No sdb on this PATH: the runner says so at start and offers nothing.
        self.write_config("sdb: {serial: tv-1}")
        path = ":".join(d for d in self.env["PATH"].split(":")
                        if not os.access(os.path.join(d, "sdb"), os.X_OK))
        p = subprocess.run([self.runner, "--config", self.cfg, "--coordinator",
                            "tcp://127.0.0.1:%d" % free_port(), "--workdir", self.workdir],
                           capture_output=True, text=True, timeout=30,
                           env=dict(self.env, PATH=path))
        self.assertNotEqual(p.returncode, 0, p)
        self.assertIn("device board: transport sdb needs the 'sdb' program, which is not on PATH",
                      p.stderr)

    def test_wrong_serial_and_bad_config(self):
        self.write_config("adb: {serial: nope, dir: %s}" % self.board)
        url, sha = self.artifact("bench.sh", BENCH)
        r = self.measure(url, sha)
        self.assertEqual(r["status"], "failed", r)
        self.assertIn("error: device 'nope' not found", r["error"])
        for bad, want in (("adb: {}", "transport adb needs a serial"),
                          ("ssh: {port: 22}", "transport ssh needs a host"),
                          ("telnet: {host: x}", "unknown transport 'telnet'"),
                          ("ssh: {host: h, prot: 2}", "did you mean 'port'"),
                          ("ssh: {host: -oProxyCommand=touch /tmp/x}", "starts with '-'"),
                          ("adb: {serial: -H}", "starts with '-'")):
            self.write_config(bad)
            p = subprocess.run([self.runner, "measure", "--config", self.cfg, "--device", "board",
                                "--benchmark", "run-script"], capture_output=True, text=True,
                               timeout=30)
            self.assertEqual(p.returncode, 2, p)
            self.assertRegex(p.stderr, r"runner\.yaml:\d+:\d+: .*" + want.replace("(", r"\("))


if __name__ == "__main__":
    main()
