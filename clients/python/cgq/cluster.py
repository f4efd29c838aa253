"""cgq.cluster: cgq.local(), a private cgq cluster on this machine for as long as a `with`
block runs, as `cgq run` starts one: redis-server on a free loopback port
(its own config, in a temporary directory), cgq-coordinator on ports the
kernel picks (read back from its ready line), and N cgq-workers. Everything
is stopped by PID on the way out (SIGTERM, then SIGKILL).

    with cgq.local(workers=2) as c:
        job = c.submit("tune.yaml")
        job.wait()
        print(job.best())

Binaries: bin_dir, else $CGQ_BIN_DIR, else the folder of `cgq` on PATH, else
each one on PATH.
"""

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from . import keyspace
from .errors import CgqError

_READY = re.compile(r"^cgq-coordinator ready nodes=(\S+) control=(\S+) epoch=(\d+)$", re.M)


def find_binary(name, bin_dir=None):
    """The path of a cgq program; CgqError saying where it looked."""
    dirs = []
    if bin_dir:
        dirs.append(bin_dir)
    elif os.environ.get("CGQ_BIN_DIR"):
        dirs.append(os.environ["CGQ_BIN_DIR"])
    else:
        cli = shutil.which("cgq")
        if cli:
            dirs.append(os.path.dirname(os.path.realpath(cli)))
    for d in dirs:
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    if not bin_dir:
        p = shutil.which(name)
        if p:
            return p
    raise CgqError("cannot find %s (looked in %s%s): build cgq (make build) and set CGQ_BIN_DIR "
                   "to its build/bin, pass bin_dir=, or put cgq on PATH" % (
                       name, ", ".join(dirs) or "no folder", "" if bin_dir else " and on PATH"))


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path, n=2000):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


class LocalCluster:
    """The processes of one cgq.local(): .dir (logs in .dir/logs), .redis_url,
    .nodes (the node endpoint), .control, .procs (name -> Popen)."""

    def __init__(self, dir, bin_dir=None):
        self.dir = dir
        self.logs = os.path.join(dir, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.bin_dir = bin_dir
        self.procs = {}
        self.redis_url = self.nodes = self.control = None
        self._workers = 0

    def _spawn(self, name, argv, stdout=None):
        out = stdout if stdout is not None else \
            open(os.path.join(self.logs, name + ".stdout.log"), "ab")
        with open(os.path.join(self.logs, name + ".stderr.log"), "ab") as err:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 cwd=self.dir, start_new_session=True)
        if stdout is None:
            out.close()
        self.procs[name] = p
        return p

    def _died(self, name, p):
        return CgqError("%s exited with %s while starting; its log (%s):\n%s" % (
            name, p.returncode, os.path.join(self.logs, name + ".stderr.log"),
            _tail(os.path.join(self.logs, name + ".stderr.log"))
            or _tail(os.path.join(self.logs, name + ".stdout.log"))))

    def start_redis(self, timeout):
        server = shutil.which("redis-server")
        if not server:
            raise CgqError("cgq.local() needs redis-server on PATH (apt-get install redis-server)")
        rdir = os.path.join(self.dir, "redis")
        os.makedirs(rdir, exist_ok=True)
        for _ in range(5):  # a port taken between the probe and the bind: another one
            port = _free_port()
            conf = os.path.join(rdir, "redis.conf")
            with open(conf, "w") as f:
                f.write("port %d\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir %s\n"
                        "save \"\"\nappendonly no\nlogfile \"\"\n" % (port, rdir))
            p = self._spawn("redis", [server, conf])
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and p.poll() is None:
                try:
                    with socket.create_connection(("127.0.0.1", port), 0.5) as s:
                        s.sendall(b"PING\r\n")
                        if s.recv(64).startswith(b"+PONG"):
                            self.redis_url = "redis://127.0.0.1:%d/0" % port
                            return
                except OSError:
                    pass
                time.sleep(0.05)
            self._stop("redis")
        raise CgqError("redis-server did not answer PING on a free loopback port; its log:\n%s"
                       % _tail(os.path.join(self.logs, "redis.stdout.log")))

    def start_coordinator(self, timeout, extra=()):
        name = "coordinator"
        out_path = os.path.join(self.logs, name + ".stdout.log")
        with open(out_path, "ab") as out:
            # --durable-after 0: this Redis keeps nothing across a crash anyway,
            # and workers get their Acks at once (else each waits 3 s to stop)
            p = self._spawn(name, [find_binary("cgq-coordinator", self.bin_dir),
                                   "--redis", self.redis_url, "--bind", "tcp://127.0.0.1:0",
                                   "--control", "tcp://127.0.0.1:0", "--durable-after", "0"]
                            + list(extra), stdout=out)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = _READY.search(_tail(out_path, 4096))
            if m:
                self.nodes, self.control = m.group(1), m.group(2)
                return
            if p.poll() is not None:
                raise self._died(name, p)
            time.sleep(0.02)
        raise CgqError("cgq-coordinator printed no ready line within %gs; its log:\n%s"
                       % (timeout, _tail(os.path.join(self.logs, name + ".stderr.log"))))

    def start_worker(self, cpus=None, gpus="none", timeout=20.0, extra=()):
        """Starts one more cgq-worker (id local-N) and waits until it is alive."""
        self._workers += 1
        wid = "local-%d" % self._workers
        argv = [find_binary("cgq-worker", self.bin_dir), "--coordinator", self.nodes, "--id", wid,
                "--gpus", gpus, "--workdir", os.path.join(self.dir, "work")]
        if cpus:
            argv += ["--cpus", str(cpus)]
        p = self._spawn("worker-" + wid, argv + list(extra))
        import redis
        r = redis.Redis.from_url(self.redis_url, decode_responses=True)
        try:
            deadline = time.monotonic() + timeout
            while r.hget(keyspace.node(wid), "state") != "alive":
                if p.poll() is not None:
                    raise self._died("worker-" + wid, p)
                if time.monotonic() > deadline:
                    raise CgqError("worker %s did not join the coordinator within %gs; its log:\n%s"
                                   % (wid, timeout, _tail(os.path.join(
                                       self.logs, "worker-%s.stderr.log" % wid))))
                time.sleep(0.05)
        finally:
            r.close()
        return wid

    def _stop(self, name, grace=10.0):
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        try:
            p.send_signal(signal.SIGTERM)
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
        except ProcessLookupError:
            pass

    def stop(self):
        """Workers first, then the coordinator, then Redis: each by its PID."""
        for name in [n for n in self.procs if n.startswith("worker-")]:
            self._stop(name)
        self._stop("coordinator")
        self._stop("redis")


@contextlib.contextmanager
def local(workers=1, cpus=None, gpus="auto", bin_dir=None, dir=None, keep=False,
          timeout=30.0, client_timeout=5.0, coordinator_args=(), worker_args=()):
    """A private cluster for the `with` block; yields a Client connected to
    it (its .local is the LocalCluster: .dir, .redis_url, .control, .nodes,
    .start_worker()). workers: how many cgq-workers; cpus: CPU slots of each
    (default: this machine's cores divided among them, at least 1); gpus: as
    cgq-worker --gpus (auto, none, 0,1, fake:N). dir: where logs, Redis and
    trial directories go (default a new temporary directory, removed on exit
    unless keep or something failed to start)."""
    from .client import Client
    own = dir is None
    root = tempfile.mkdtemp(prefix="cgq-local-") if own else os.path.abspath(dir)
    os.makedirs(root, exist_ok=True)
    cluster = LocalCluster(root, bin_dir)
    ok = False
    client = None
    try:
        cluster.start_redis(timeout)
        cluster.start_coordinator(timeout, coordinator_args)
        n = max(0, int(workers))
        if n and not cpus:
            cpus = max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                           else os.cpu_count() or 1) // n)
        for _ in range(n):
            cluster.start_worker(cpus=cpus, gpus=gpus, extra=worker_args)
        # CURVE off whatever CGQ_CURVE_* say: the cluster listens on loopback only
        client = Client(redis=cluster.redis_url, coordinator=cluster.control,
                        curve_secret="", curve_server="", timeout=client_timeout)
        client.local = cluster
        ok = True
        yield client
    finally:
        if client is not None:
            client.close()
        cluster.stop()
        if own and ok and not keep:
            shutil.rmtree(root, ignore_errors=True)
