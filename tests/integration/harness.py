"""harness: real processes for cgq's integration tests (Python 3 stdlib only).

Each test gets its own temporary directory holding a private redis-server
(loopback, free port, generated config), a cgq-coordinator (ports chosen by the
kernel, read back from its ready line), cgq-workers, the specs and trial
scripts it submits, and the logs of every process. Teardown stops every
started process by PID (SIGTERM, then SIGKILL), checks that the daemons
exited 0 and that no sanitizer wrote to their stderr, and fails the test
otherwise; on failure the temporary directory is kept and the log tails are
printed.

Binaries come from $CGQ_BIN_DIR (tests/CMakeLists.txt sets it to the build's
bin/), else from build/bin of this checkout.

The test process makes itself a child subreaper (prctl), so processes orphaned
by a dying worker or by `cgq run` become its children: teardown can find
leftovers, reap them and kill them by PID.
"""

import ctypes
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
import threading
import time
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN_DIR = os.path.abspath(os.environ.get("CGQ_BIN_DIR") or os.path.join(REPO, "build", "bin"))
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error")
SPEED = float(os.environ.get("CGQ_TEST_SLOWDOWN", "1"))  # stretch every deadline

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


SUBREAPER = become_subreaper()


def binary(name):
    path = os.path.join(BIN_DIR, name)
    if not os.access(path, os.X_OK):
        raise unittest.SkipTest("%s not built (set CGQ_BIN_DIR; looked in %s)" % (name, BIN_DIR))
    return path


# The fault tests' trial: appends "TRIAL ATTEMPT" to the file named first
# (one line per start, so a re-run shows), sleeps the seconds named second,
# and reports {"v": its trial id}. See Cluster.write_counted_job.
COUNTED_TRIAL = r'''
import json, os, sys, time
with open(sys.argv[1], "a") as f:
    f.write("%s %s\n" % (os.environ["CGQ_TRIAL_ID"], os.environ["CGQ_ATTEMPT"]))
time.sleep(float(sys.argv[2]))
os.write(3, (json.dumps({"v": int(os.environ["CGQ_TRIAL_ID"])}) + "\n").encode())
'''


def noop_spec(name, samples):
    """A job of `samples` no-op trials (random search over x, cpu: 1 each)."""
    return ("name: %s\nspace:\n  x: {uniform: [0, 1]}\n"
            "search: {algorithm: random, samples: %d, seed: 1}\n"
            "objective: {metric: score, mode: max}\n"
            "trial:\n  kind: noop\n  resources: {cpu: 1}\n" % (name, samples))


def open_files_at_least(test, want):
    """Lifts this process's soft open-file limit to want until test ends,
    for a test that opens that many sockets (what it starts inherits it).
    False, printing why, where the hard limit is lower: the test skips."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < want:
        print("skipped: the open-file limit's hard value is %d, under %d" % (hard, want))
        return False
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        test.addCleanup(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))
    return True


def proc_cpu_s(pid, tid=None):
    """CPU seconds (user + system) of process pid (all its threads), or of its
    thread tid; from /proc."""
    path = "/proc/%d/stat" % pid if tid is None else "/proc/%d/task/%d/stat" % (pid, tid)
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid):
    """VmRSS of pid in KiB (0 if not reported)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def require_bins(what, names):
    """Exits naming the first of names not built in BIN_DIR (bench scripts)."""
    for b in names:
        if not os.access(os.path.join(BIN_DIR, b), os.X_OK):
            sys.exit("%s: %s/%s is not built (run `make build`, or set CGQ_BIN_DIR)"
                     % (what, BIN_DIR, b))


class BenchCluster:
    """A Cluster in a temporary directory, for a bench script (bench/*.py):

        with harness.BenchCluster("bench/x.py", "cgq-bench-x-", keep) as run:
            run.c.start_redis() ...
            run.ok = True

    On the way out an interrupt or a failed step (AssertionError, OSError,
    RedisError) is printed, not raised; the cluster is stopped and what it
    reports printed; the directory is removed unless the body did not set
    run.ok, something was reported, or keep."""

    def __init__(self, what, prefix, keep=False):
        self.what, self.keep, self.ok = what, keep, False
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        self.c = Cluster(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, etype, e, tb):
        if etype is KeyboardInterrupt:
            print("\n%s: interrupted" % self.what, file=sys.stderr)
        elif etype is not None and issubclass(etype, (AssertionError, OSError, RedisError)):
            print("%s: %s" % (self.what, e), file=sys.stderr)
        problems = self.c.stop()
        for p in problems:
            print("%s: %s" % (self.what, p), file=sys.stderr)
        if not self.ok or problems or self.keep:
            print("%s: logs kept in %s" % (self.what, self.tmp), file=sys.stderr)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return etype is not None and issubclass(
            etype, (KeyboardInterrupt, AssertionError, OSError, RedisError))


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path, nbytes=3000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - nbytes))
            return f.read().decode("utf-8", "replace")
    except OSError as e:
        return "(cannot read %s: %s)" % (path, e)


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


# ---------------------------------------------------------------- processes


def proc_state(pid):
    """'R', 'S', 'Z', ... from /proc/PID/stat, or None when there is no such process."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return None
    rest = data[data.rfind(")") + 2:].split()
    return rest[0] if rest else None


def proc_ppid(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = data[data.rfind(")") + 2:].split()
    return int(rest[1]) if len(rest) > 1 else None


def proc_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def reap(pid):
    """Reap pid if it is our zombie child (we are a subreaper); harmless otherwise."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    except OSError:
        pass


def pid_alive(pid):
    """True while pid exists and is not a zombie."""
    st = proc_state(pid)
    if st == "Z":
        reap(pid)
        return False
    return st is not None


def my_children(exclude=()):
    """PIDs of live (non-zombie) children of this process, zombies reaped."""
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in exclude or proc_ppid(pid) != me:
            continue
        if pid_alive(pid):
            out.append(pid)
    return out


class Proc:
    """One started process with its log files."""

    def __init__(self, name, argv, logdir, env=None, capture_stdout=False, cwd=None):
        self.name = name
        self.argv = argv
        self.out_path = os.path.join(logdir, name + ".stdout.log")
        self.err_path = os.path.join(logdir, name + ".stderr.log")
        self.expect_exit = 0  # None: do not check (killed on purpose)
        self.stopped_rc = None
        self._out = open(self.out_path, "ab")
        self._err = open(self.err_path, "ab")
        self.popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture_stdout else self._out,
            stderr=self._err,
            env=env,
            cwd=cwd,
        )
        self.pid = self.popen.pid
        self.ready_line = None
        self._ready = threading.Event()
        self._pump = None
        if capture_stdout:
            self._pump = threading.Thread(target=self._pump_stdout, daemon=True)
            self._pump.start()

    def _pump_stdout(self):
        # Keep draining stdout into the log so the daemon never blocks on a full pipe.
        for raw in self.popen.stdout:
            self._out.write(raw)
            self._out.flush()
            if self.ready_line is None:
                self.ready_line = raw.decode("utf-8", "replace").rstrip("\n")
                self._ready.set()
        self._ready.set()

    def wait_first_line(self, timeout):
        self._ready.wait(timeout)
        return self.ready_line

    def alive(self):
        return self.popen.poll() is None

    def kill9(self):
        self.expect_exit = None
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(10)

    def stop(self, grace=15.0):
        """SIGTERM, wait, SIGKILL. Returns a problem string or None."""
        problem = None
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(grace * SPEED)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.popen.wait(10)
                problem = "%s (pid %d) did not exit within %.0fs of SIGTERM; killed" % (
                    self.name, self.pid, grace * SPEED)
        rc = self.popen.returncode
        self.stopped_rc = rc
        if self._pump is not None:
            self._pump.join(5)
            self.popen.stdout.close()
        for f in (self._out, self._err):
            try:
                f.close()
            except OSError:
                pass
        if problem is None and self.expect_exit is not None and rc != self.expect_exit:
            problem = "%s (pid %d) exited with %s, expected %d" % (self.name, self.pid, rc,
                                                                   self.expect_exit)
        return problem

    def sanitizer_report(self):
        text = tail(self.err_path, 1 << 20)
        for mark in SANITIZER_MARKS:
            i = text.find(mark)
            if i >= 0:
                return "%s stderr contains %r: %s" % (self.name, mark, text[max(0, i - 200):i + 600])
        return None


# ---------------------------------------------------------------- Redis


class RedisError(Exception):
    pass


class Redis:
    """A tiny RESP2 client: enough for HGETALL, ZRANGE, XRANGE, INFO, pipelines."""

    def __init__(self, host, port, timeout=10.0):
        self.addr = (host, port)
        self.timeout = timeout
        self.sock = None
        self.buf = b""

    def _connect(self):
        self.sock = socket.create_connection(self.addr, self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    @staticmethod
    def _encode(args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            if isinstance(a, bytes):
                b = a
            elif isinstance(a, float):
                b = repr(a).encode()
            else:
                b = str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return b"".join(parts)

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("redis %s:%d closed the connection" % self.addr)
        self.buf += chunk

    def _line(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                return line
            self._fill()

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RedisError(rest.decode("utf-8", "replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n).decode("utf-8", "replace")
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RedisError("unexpected reply line %r" % line)

    def pipeline(self, commands, raise_errors=True):
        if self.sock is None:
            self._connect()
        try:
            self.sock.sendall(b"".join(self._encode(c) for c in commands))
            replies = [self._reply() for _ in commands]
        except (OSError, ConnectionError):
            self.close()
            raise
        if raise_errors:
            for c, r in zip(commands, replies):
                if isinstance(r, RedisError):
                    raise RedisError("%s: %s" % (" ".join(map(str, c))[:200], r))
        return replies

    def cmd(self, *args):
        return self.pipeline([args])[0]

    def hgetall(self, key):
        flat = self.cmd("HGETALL", key) or []
        return dict(zip(flat[0::2], flat[1::2]))

    def xrange(self, key):
        out = []
        for entry_id, fields in self.cmd("XRANGE", key, "-", "+") or []:
            d = dict(zip(fields[0::2], fields[1::2]))
            d["_id"] = entry_id
            out.append(d)
        return out

    def info(self, section):
        text = self.cmd("INFO", section) or ""
        out = {}
        for line in text.splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out


# ---------------------------------------------------------------- ZMTP


class ZmtpPeer:
    """Just enough ZMTP 3.0 (NULL mechanism) to talk to a ZeroMQ ROUTER as a
    DEALER/REQ peer would, over one connection: send() delivers one
    multi-frame message. Used to send garbage that passes the transport and
    reaches the application, and messages no real node would send."""

    def __init__(self, host, port, socket_type=b"DEALER", identity=b"", timeout=3.0):
        self.sock = s = socket.create_connection((host, port), timeout)
        try:
            s.sendall(b"\xff" + b"\x00" * 7 + b"\x01" + b"\x7f" + b"\x03\x00" +
                      b"NULL".ljust(20, b"\x00") + b"\x00" + b"\x00" * 31)
            got = b""
            while len(got) < 64:
                c = s.recv(64 - len(got))
                if not c:
                    raise ConnectionError("peer closed the connection during the ZMTP greeting")
                got += c

            def prop(name, value):
                return bytes([len(name)]) + name + struct.pack(">I", len(value)) + value

            body = b"\x05READY" + prop(b"Socket-Type", socket_type) + prop(b"Identity", identity)
            s.sendall(b"\x04" + bytes([len(body)]) + body)
            hdr = s.recv(2)
            if len(hdr) < 2 or hdr[0] & 0x04 == 0:
                raise ConnectionError("no READY from the peer (got %r)" % hdr)
            self._read(hdr[1] if not hdr[0] & 0x02 else 0)  # the rest of READY
        except BaseException:
            s.close()
            raise

    def send(self, frames):
        for i, f in enumerate(frames):
            flags = 0x01 if i < len(frames) - 1 else 0x00
            if len(f) > 255:
                self.sock.sendall(bytes([flags | 0x02]) + struct.pack(">Q", len(f)) + f)
            else:
                self.sock.sendall(bytes([flags, len(f)]) + f)

    def _read(self, n):
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the peer closed the connection")
            data += chunk
        return data

    def recv(self):
        """The next message (a list of frames); ZMTP commands are skipped."""
        frames = []
        while True:
            flags = self._read(1)[0]
            n = struct.unpack(">Q", self._read(8))[0] if flags & 0x02 else self._read(1)[0]
            data = self._read(n)
            if flags & 0x04:
                continue
            frames.append(data)
            if not flags & 0x01:
                return frames

    def close(self, linger=0.2):
        time.sleep(linger)
        self.sock.close()


# Hand-encoded protobuf for schemas/cgq.proto (field numbers from there), so
# that a test can send messages no real node would: forged results, wrong
# versions, truncated envelopes.

def pb_varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_int(field, n):
    return pb_varint(field << 3) + pb_varint(n)


def pb_bytes(field, data):
    if isinstance(data, str):
        data = data.encode()
    return pb_varint(field << 3 | 2) + pb_varint(len(data)) + data


def pb_task(job, trial, attempt, stage=0):
    return pb_int(1, job) + pb_int(2, trial) + pb_int(3, stage) + pb_int(4, attempt)


def pb_envelope(body_field, body, version=1):
    """Envelope{version, oneof body}: 10 Hello, 12 Heartbeat, 14 Progress,
    15 Result, 16 Ack, 18 Bye, 20 ResultBatch, 30 SubmitJob, 32 CancelJob,
    34 Ping."""
    return pb_int(1, version) + pb_bytes(body_field, body)


def heartbeat_rtt(peer):
    """The round trip, in seconds, of one node Heartbeat (an empty one) sent
    through peer (a ZmtpPeer on the coordinator's node endpoint): how long
    the coordinator's loop takes to answer a node."""
    t0 = time.monotonic()
    peer.send([pb_envelope(12, b"")])
    peer.recv()
    return time.monotonic() - t0


def pb_result(task, status=0, metrics_json="{}"):
    return pb_envelope(15, pb_bytes(1, task) + pb_int(2, status) + pb_bytes(3, metrics_json))


def pb_result_batch(results):
    """ResultBatch (body 20) of (task, status, metrics_json) triples."""
    return pb_envelope(20, b"".join(
        pb_bytes(1, pb_bytes(1, task) + pb_int(2, status) + pb_bytes(3, metrics))
        for task, status, metrics in results))


def pb_progress(task, report_json, seq=1):
    return pb_envelope(14, pb_bytes(1, task) + pb_bytes(2, report_json) + pb_int(3, seq))


def pb_hello(node_id, cpus=0.0):
    res = pb_varint(1 << 3 | 1) + struct.pack("<d", cpus)
    return pb_envelope(10, pb_bytes(1, node_id) + pb_bytes(3, res) + pb_bytes(8, "0.1.0"))


def pb_submit(spec_yaml, spec_path="spec.yaml", spec_dir="/"):
    return pb_envelope(30, pb_bytes(1, spec_yaml) + pb_bytes(2, spec_path) + pb_bytes(3, spec_dir))


def zmtp_send(host, port, frames, socket_type=b"DEALER", identity=b"", timeout=3.0):
    """One multi-frame message over a fresh ZMTP connection (ZmtpPeer)."""
    p = ZmtpPeer(host, port, socket_type, identity, timeout)
    try:
        p.send(frames)
    finally:
        p.close()


def raw_tcp_send(host, port, data, timeout=3.0):
    """Bytes straight onto a TCP connection, no ZMTP at all."""
    s = socket.create_connection((host, port), timeout)
    try:
        s.sendall(data)
        time.sleep(0.2)
    except OSError:
        pass
    finally:
        s.close()


def endpoint_port(ep):
    return int(ep.rsplit(":", 1)[1])


# ---------------------------------------------------------------- cluster

class Netns:
    """Network namespaces and veth pairs that a test creates (root only), and
    cuts that drop packets silently: a pfifo qdisc of limit 0 on both ends of
    a pair, so TCP sees a partition (retransmits, no refusal, no
    ENETUNREACH), not a link going down. Only addresses inside these
    namespaces are used (10.204.x.y/30). skip_reason() says why it cannot
    run here; close() deletes the namespaces (their veths go with them)."""

    CLONE_NEWNET = 0x40000000

    def __init__(self, prefix="cgqp"):
        import random
        self.tag = "%d%02d" % (os.getpid() % 10000, random.randrange(100))
        self.prefix = prefix
        self.names, self.links = [], []
        self.net = int(self.tag) % 250

    @staticmethod
    def skip_reason():
        if os.geteuid() != 0:
            return "needs root (network namespaces); CI runs it as root"
        for b in ("ip", "tc"):
            if shutil.which(b) is None:
                return "%s is not installed (Debian: iproute2)" % b
        return None

    def enter_home(self, skip=None):
        """For a test file's __main__: unless skip (or skip_reason()) says
        why not, makes namespace "a" and moves this process into it (the tests
        then start their daemons there). Returns (namespace or None, the
        reason to skip or None), the reason printed."""
        skip = skip or self.skip_reason()
        ns = None
        if not skip:
            try:
                ns = self.add("a")
                self.enter(ns)
            except OSError as e:
                skip = "cannot set up the network namespaces: %s" % e
        if skip:
            print("skipped: " + skip)
        return ns, skip

    @staticmethod
    def _run(*argv):
        r = subprocess.run(list(argv), capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise OSError("%s: exit %d: %s" % (" ".join(argv), r.returncode, r.stderr.strip()))
        return r.stdout

    def add(self, short):
        """A new namespace with its loopback up; returns its name."""
        name = "%s%s%s" % (self.prefix, short, self.tag)
        self._run("ip", "netns", "add", name)
        self.names.append(name)
        self._run("ip", "-n", name, "link", "set", "lo", "up")
        return name

    def link(self, ns_a, ns_b):
        """A veth pair between two of our namespaces; returns
        (addr_a, addr_b, index) where index names the pair for cut/heal."""
        i = len(self.links)
        dev_a, dev_b = "cgqv%da%s" % (i, self.tag), "cgqv%db%s" % (i, self.tag)
        addr_a, addr_b = "10.204.%d.%d" % (self.net, 4 * i + 1), "10.204.%d.%d" % (
            self.net, 4 * i + 2)
        self._run("ip", "link", "add", dev_a, "type", "veth", "peer", "name", dev_b)
        for ns, dev, addr in ((ns_a, dev_a, addr_a), (ns_b, dev_b, addr_b)):
            self._run("ip", "link", "set", dev, "netns", ns)
            self._run("ip", "-n", ns, "addr", "add", addr + "/30", "dev", dev)
            self._run("ip", "-n", ns, "link", "set", dev, "up")
        self.links.append(((ns_a, dev_a), (ns_b, dev_b)))
        return addr_a, addr_b, i

    def enter(self, ns):
        """Moves the calling thread (call it before any other thread starts)
        and the processes it starts from then on into ns."""
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open("/var/run/netns/" + ns, os.O_RDONLY)
        try:
            if libc.setns(fd, self.CLONE_NEWNET) != 0:
                raise OSError("setns %s: %s" % (ns, os.strerror(ctypes.get_errno())))
        finally:
            os.close(fd)

    def cut(self, i):
        for ns, dev in self.links[i]:
            self._run("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root",
                      "pfifo", "limit", "0")

    def heal(self, i):
        for ns, dev in self.links[i]:
            self._run("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root")

    def close(self):
        for ns in reversed(self.names):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        self.names, self.links = [], []


READY_RE = re.compile(r"^cgq-coordinator ready nodes=(\S+) control=(\S+) epoch=(\d+)$")


class Cluster:
    """Redis + coordinator + workers of one test, all under tmp."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.logdir = os.path.join(tmp, "logs")
        self.specdir = os.path.join(tmp, "specs")
        os.makedirs(self.logdir, exist_ok=True)
        os.makedirs(self.specdir, exist_ok=True)
        self.procs = []        # in start order
        self.redis_proc = None
        self.redis = None
        self.redis_port = None
        self.redis_url = None
        self.coordinator = None
        self.nodes_ep = None
        self.control_ep = None
        self.epoch = None
        self.workers = {}
        self.allow_orphans = False
        self.cli_runs = 0

    # -- redis

    def start_redis(self, appendonly=False, bind=()):
        """bind: addresses besides 127.0.0.1 (a namespace's veth end)."""
        for attempt in range(5):
            port = free_port()
            rdir = os.path.join(self.tmp, "redis")
            os.makedirs(rdir, exist_ok=True)
            conf = os.path.join(rdir, "redis.conf")
            with open(conf, "w") as f:
                f.write("port %d\nbind %s\nprotected-mode no\ndaemonize no\n"
                        "dir %s\nsave \"\"\nlogfile \"\"\ndatabases 4\n"
                        % (port, " ".join(("127.0.0.1",) + tuple(bind)), rdir))
                f.write("appendonly yes\nappendfsync always\n" if appendonly else
                        "appendonly no\n")
            self.redis_conf = conf
            p = Proc("redis", ["redis-server", conf], self.logdir)
            r = Redis("127.0.0.1", port)
            deadline = time.monotonic() + 10 * SPEED
            while time.monotonic() < deadline and p.alive():
                try:
                    if r.cmd("PING") == "PONG":
                        self.redis_proc, self.redis, self.redis_port = p, r, port
                        self.redis_url = "redis://127.0.0.1:%d/0" % port
                        return
                except (OSError, ConnectionError):
                    r.close()
                time.sleep(0.05)
            p.expect_exit = None
            p.stop(2)
        raise AssertionError("redis-server did not answer PING on a free port (5 tries); log:\n" +
                             tail(os.path.join(self.logdir, "redis.stdout.log")))

    def stop_redis(self):
        """Stops Redis (SIGTERM: with appendonly its data survives)."""
        problem = self.redis_proc.stop(10)
        if problem:
            raise AssertionError(problem)
        self.redis.close()

    def restart_redis(self):
        """Starts Redis again on the same port and config; waits for PING."""
        p = Proc("redis", ["redis-server", self.redis_conf], self.logdir)
        self.redis_proc = p
        deadline = time.monotonic() + 10 * SPEED
        while time.monotonic() < deadline and p.alive():
            try:
                if self.redis.cmd("PING") == "PONG":
                    return
            except (OSError, ConnectionError, RedisError):
                self.redis.close()
            time.sleep(0.05)
        raise AssertionError("redis-server did not come back on port %d; log:\n%s" % (
            self.redis_port, tail(os.path.join(self.logdir, "redis.stdout.log"))))

    # -- coordinator

    def start_coordinator(self, extra=(), heartbeat="200ms"):
        argv = [binary("cgq-coordinator"), "--redis", self.redis_url,
                "--bind", "tcp://127.0.0.1:0", "--control", "tcp://127.0.0.1:0",
                "--heartbeat", heartbeat] + list(extra)
        p = Proc("coordinator", argv, self.logdir, capture_stdout=True)
        self.procs.append(p)
        self.coordinator = p
        line = p.wait_first_line(30 * SPEED)
        if line is None:
            raise AssertionError("coordinator printed no ready line within 30s (exit %s); stderr:\n%s"
                                 % (p.popen.poll(), tail(p.err_path)))
        m = READY_RE.match(line)
        if not m:
            raise AssertionError("coordinator's first stdout line is not the documented ready line:\n"
                                 "  expected: cgq-coordinator ready nodes=EP control=EP epoch=N\n"
                                 "  got:      %r" % line)
        self.nodes_ep, self.control_ep, self.epoch = m.group(1), m.group(2), int(m.group(3))
        for ep in (self.nodes_ep, self.control_ep):
            if not re.match(r"^tcp://127\.0\.0\.1:[1-9]\d*$", ep):
                raise AssertionError("ready line endpoint %r is not tcp://127.0.0.1:PORT with the "
                                     "port actually bound (asked for port 0)" % ep)
        return p

    # -- workers

    def start_worker(self, wid, cpus=2, gpus="none", extra=(), wait=True, kill_grace="1s"):
        workdir = os.path.join(self.tmp, wid)
        argv = [binary("cgq-worker"), "--coordinator", self.nodes_ep, "--id", wid,
                "--cpus", str(cpus), "--gpus", gpus, "--workdir", workdir,
                "--kill-grace", kill_grace] + list(extra)
        p = Proc("worker-" + wid, argv, self.logdir)
        p.workdir = workdir
        self.procs.append(p)
        self.workers[wid] = p
        if wait:
            self.wait_for(lambda: self.redis.hgetall("cgq:node:" + wid).get("state") == "alive",
                          20, "worker %s to be alive in cgq:node:%s" % (wid, wid))
        return p

    # -- CLI

    def cli_env(self, **extra):
        env = dict(os.environ)
        if self.redis_url:
            env["CGQ_REDIS"] = self.redis_url
        if self.control_ep:
            env["CGQ_COORDINATOR"] = self.control_ep
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return env

    def cgq(self, *args, timeout=60, env=None, cwd=None):
        """Run the cgq CLI; returns CompletedProcess (text). Logs it. Never
        accepts sanitizer output."""
        self.cli_runs += 1
        argv = [binary("cgq")] + [str(a) for a in args]
        t0 = time.monotonic()
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                               env=env or self.cli_env(), cwd=cwd, timeout=timeout * SPEED)
        except subprocess.TimeoutExpired as e:
            raise AssertionError("`%s` did not finish within %ss; stdout:\n%s\nstderr:\n%s" % (
                " ".join(argv[1:]), timeout, (e.stdout or b"").decode("utf-8", "replace")[-3000:],
                (e.stderr or b"").decode("utf-8", "replace")[-3000:]))
        r.elapsed = time.monotonic() - t0
        r.stdout = r.stdout.decode("utf-8", "replace")
        r.stderr = r.stderr.decode("utf-8", "replace")
        with open(os.path.join(self.logdir, "cli-%02d.log" % self.cli_runs), "w") as f:
            f.write("$ cgq %s\n[exit %d, %.2fs]\n--- stdout\n%s\n--- stderr\n%s\n" % (
                " ".join(argv[1:]), r.returncode, r.elapsed, r.stdout, r.stderr))
        for mark in SANITIZER_MARKS:
            if mark in r.stderr:
                raise AssertionError("`cgq %s` stderr contains %r:\n%s" % (
                    " ".join(argv[1:]), mark, r.stderr[-4000:]))
        return r

    def write_file(self, name, text, mode=0o644):
        path = os.path.join(self.specdir, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    def write_counted_job(self, name, n, sleep_s):
        """Writes a grid job of n trials of COUNTED_TRIAL (counted.py beside
        it) that each sleep sleep_s and report {"v": trial id}; returns the
        spec's path. counted_runs() says which (trial, attempt) ran."""
        self.write_file("counted.py", COUNTED_TRIAL)
        return self.write_file(name + ".yaml", """name: %s
space:
  i: {grid: [%s]}
objective: {metric: v, mode: max}
trial:
  command: python3 {spec_dir}/counted.py {spec_dir}/runs.txt %s
  resources: {cpu: 1}
""" % (name, ", ".join(str(i) for i in range(n)), sleep_s))

    def counted_runs(self):
        """Every start of a COUNTED_TRIAL, as sorted (trial, attempt) pairs."""
        with open(os.path.join(self.specdir, "runs.txt")) as f:
            return sorted(tuple(map(int, line.split())) for line in f if line.strip())

    def submit(self, spec_path, timeout=30):
        """cgq submit; returns the job id (int). Fails the test on exit != 0."""
        before = set(self.redis.cmd("ZRANGE", "cgq:jobs", 0, -1) or [])
        r = self.cgq("submit", spec_path, timeout=timeout)
        if r.returncode != 0:
            raise AssertionError("cgq submit %s: exit %d\nstdout: %s\nstderr: %s" % (
                spec_path, r.returncode, r.stdout, r.stderr))
        out = r.stdout.strip()
        m = re.fullmatch(r"(\d+)", out) or re.search(r"\bjob\b\D{0,8}?(\d+)", out, re.I)
        if m:
            return int(m.group(1))
        after = set(self.redis.cmd("ZRANGE", "cgq:jobs", 0, -1) or [])
        new = sorted(after - before, key=int)
        if len(new) == 1:
            return int(new[0])
        raise AssertionError("cannot tell the job id from `cgq submit` stdout %r (new in cgq:jobs: %s)"
                             % (out, new))

    # -- Redis reads

    def job(self, j):
        return self.redis.hgetall("cgq:job:{%d}" % j)

    def trial(self, j, t):
        return self.redis.hgetall("cgq:job:{%d}:trial:%d" % (j, t))

    def trial_ids(self, j):
        keys = []
        cursor = "0"
        while True:
            cursor, batch = self.redis.cmd("SCAN", cursor, "MATCH", "cgq:job:{%d}:trial:*" % j,
                                           "COUNT", 1000)
            keys.extend(batch)
            if cursor == "0":
                break
        return sorted(int(k.rsplit(":", 1)[1]) for k in keys)

    def trials(self, j):
        ids = self.trial_ids(j)
        replies = self.redis.pipeline([("HGETALL", "cgq:job:{%d}:trial:%d" % (j, t)) for t in ids])
        return {t: dict(zip(r[0::2], r[1::2])) for t, r in zip(ids, replies)}

    def events(self, j=None):
        """cgq:events, one dict per transition: an entry listing several
        trials ("trials": "T:A[@NODE] ...", docs/architecture.md) becomes
        one dict per trial, with "trial", "attempt" and "node" as a
        single-trial entry has them."""
        ev = []
        for e in self.redis.xrange("cgq:events"):
            if "trials" not in e:
                ev.append(e)
                continue
            for item in e["trials"].split():
                t, _, rest = item.partition(":")
                a, _, node = rest.partition("@")
                d = {k: v for k, v in e.items() if k != "trials"}
                d.update(trial=t, attempt=a)
                if node:
                    d["node"] = node
                ev.append(d)
        if j is not None:
            ev = [e for e in ev if e.get("job") == str(j)]
        return ev

    # -- waiting

    def check_daemons(self):
        for p in self.procs:
            if p.expect_exit is not None and not p.alive():
                raise AssertionError("%s exited early with %s; stderr tail:\n%s" % (
                    p.name, p.popen.returncode, tail(p.err_path)))
        if self.redis_proc is not None and not self.redis_proc.alive():
            raise AssertionError("redis-server exited early")

    def wait_for(self, fn, timeout, what, interval=0.05):
        deadline = time.monotonic() + timeout * SPEED
        last = None
        while True:
            self.check_daemons()
            last = fn()
            if last:
                return last
            if time.monotonic() > deadline:
                raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
            time.sleep(interval)

    def wait_value(self, fn, pred, timeout, what):
        """Polls fn() until pred(value) holds; returns that value."""
        box = []

        def check():
            box[:] = [fn()]
            return pred(box[0])
        self.wait_for(check, timeout, what)
        return box[0]

    def wait_job(self, j, timeout=60, states=("finished", "cancelled")):
        def done():
            h = self.job(j)
            return h if h.get("state") in states else None
        try:
            return self.wait_for(done, timeout, "job %d to reach %s" % (j, "/".join(states)))
        except AssertionError as e:
            raise AssertionError("%s; job hash now: %s" % (e, self.job(j)))

    # -- teardown

    def stop(self):
        """Stops everything; returns a list of problems (empty when clean)."""
        problems = []
        workers = [p for p in self.procs if p is not self.coordinator]
        for p in reversed(workers):
            pr = p.stop()
            if pr:
                problems.append(pr)
        if self.coordinator is not None:
            pr = self.coordinator.stop()
            if pr:
                problems.append(pr)
        for p in self.procs:
            s = p.sanitizer_report()
            if s:
                problems.append(s)
        if self.redis is not None:
            self.redis.close()
        if self.redis_proc is not None:
            self.redis_proc.expect_exit = None
            self.redis_proc.stop(5)
        problems.extend(kill_leftovers(self.allow_orphans))
        return problems

    def log_tails(self):
        out = []
        for name in sorted(os.listdir(self.logdir)):
            path = os.path.join(self.logdir, name)
            if os.path.getsize(path) == 0:
                continue
            out.append("----- %s (tail)\n%s" % (name, tail(path, 2500)))
        return "\n".join(out)


def kill_leftovers(allowed):
    """Processes that became our children (orphans of workers or of `cgq run`)
    and still run: kill them by PID. A problem unless allowed."""
    if not SUBREAPER:
        return []
    problems = []
    deadline = time.monotonic() + 3
    left = my_children()
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = my_children()
    for pid in left:
        if not allowed:
            problems.append("process %d (%s) was left running after every daemon stopped" % (
                pid, proc_cmdline(pid)[:200]))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    return problems


class CgqTestCase(unittest.TestCase):
    """A test with a private temp dir and Cluster; checks daemons in tearDown.

    Subclasses call self.cluster.start_redis() etc. (or self.start_default()).
    """

    keep_tmp = bool(os.environ.get("CGQ_KEEP_TMP"))

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cgq-itest-%s-" % self.id().rsplit(".", 1)[-1])
        self.cluster = Cluster(self.tmp)

    def tearDown(self):
        problems = self.cluster.stop()
        if problems:
            self.fail("teardown found problems:\n  " + "\n  ".join(problems))

    def run(self, result=None):
        result = result if result is not None else self.defaultTestResult()
        before = len(result.failures) + len(result.errors)
        super().run(result)
        failed = len(result.failures) + len(result.errors) > before
        tmp = getattr(self, "tmp", None)
        if tmp is None:
            return result
        if failed:
            sys.stderr.write("\n===== %s failed; logs kept in %s\n%s\n" % (
                self.id(), tmp, self.cluster.log_tails()))
            sys.stderr.flush()
        elif not self.keep_tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        return result

    # convenience

    def assert_exactly_once(self, j, n, timeout=60):
        """Job j (a write_counted_job of n trials) finishes with every trial
        succeeded once: the counts, the records (attempt 1), the trials'
        own markers, the leaderboard, the active set and one end event each."""
        c = self.cluster
        job = c.wait_job(j, timeout)
        self.assertEqual(job.get("state"), "finished", job)
        states = ("pending", "running", "succeeded", "failed", "stopped", "cancelled",
                  "unschedulable", "stale")
        counts = {k: int(job.get(k, "0")) for k in states}
        self.assertEqual(counts["succeeded"], n, job)
        self.assertEqual(sum(counts.values()), n, job)
        trials = c.trials(j)
        self.assertEqual(sorted(trials), list(range(n)), "a record for every trial")
        for t, h in trials.items():
            self.assertEqual(h.get("state"), "succeeded", "trial %d: %s" % (t, h))
            self.assertEqual(h.get("attempt"), "1", "trial %d ran once: %s" % (t, h))
        self.assertEqual(c.counted_runs(), [(t, 1) for t in range(n)],
                         "each trial's script ran exactly once")
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), n)
        self.assertEqual(c.redis.cmd("SCARD", "cgq:job:{%d}:active" % j), 0)
        ev = c.events(j)
        for t in range(n):
            ends = [e["type"] for e in ev if e.get("trial") == str(t) and e.get("type") in
                    ("trial.succeeded", "trial.failed", "trial.cancelled")]
            self.assertEqual(ends, ["trial.succeeded"], "trial %d ends exactly once" % t)

    def start_default(self, workers=(("w1", 2),), **coord):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(**coord)
        for wid, cpus in workers:
            c.start_worker(wid, cpus=cpus)
        return c


def params_of(trial):
    return json.loads(trial.get("params") or "{}")


def metrics_of(trial):
    return json.loads(trial.get("metrics") or "{}")


def fnum(s):
    return float(s) if s not in (None, "") else None


def main():
    """unittest.main, but exit 77 (ctest SKIP_RETURN_CODE) when every test
    was skipped, e.g. because the binaries are not built."""
    prog = unittest.main(verbosity=2, exit=False)
    r = prog.result
    if not r.wasSuccessful():
        sys.exit(1)
    if r.testsRun and len(r.skipped) == r.testsRun:
        sys.exit(77)
    sys.exit(0)
