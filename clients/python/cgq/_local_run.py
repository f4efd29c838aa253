"""The state a `cgq run` left in ./.cgq, for a Client made there.

`cgq run tune.yaml` keeps its Redis data in ./.cgq/redis and stops its
redis-server when it ends; `cgq results` from the same directory starts one
on that data for the length of the command (cli/local.c). A cgq.Client()
made in that directory with no redis= and no CGQ_REDIS does the same: it
reads the run's state, through the run's own redis-server when the run is
still going (and sends control requests to its coordinator), else through
one it starts on the data and stops when the client is closed or the
program exits. The lock file (.cgq/redis/read.lock) is the CLI's, so a CLI
command and a client never start two servers on one directory.
"""

import atexit
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from .errors import CgqError

LOCAL_DIR = ".cgq"
LOAD_TIMEOUT = 60.0  # a large AOF takes a while to load
LOAD_NOTE = 2.0      # then it says what it waits for


def _answers(sock_path, timeout=0.5):
    """True when a Redis answers PING on the Unix socket sock_path."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(sock_path)
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def _last_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = [x.strip() for x in f if x.strip()]
        return lines[-1] if lines else "no output"
    except OSError:
        return "no output"


def _control_endpoint(root):
    """The control endpoint of the run's coordinator, from the ready line it
    printed ("cgq-coordinator ready nodes=EP control=EP epoch=N"), or None."""
    try:
        with open(os.path.join(root, "logs", "coordinator.out"), errors="replace") as f:
            for line in f:
                if line.startswith("cgq-coordinator ready "):
                    for tok in line.split():
                        if tok.startswith("control="):
                            return tok[len("control="):]
    except OSError:
        pass
    return None


class LocalRun:
    """A `cgq run` directory's state: .url (unix:// of its Redis), .running
    (the run's own redis-server answered), .coordinator (its control
    endpoint while running, else None). close() stops a redis-server this
    object started (once; also at exit)."""

    def __init__(self, root):
        self.root = root
        self.sock = os.path.join(root, "redis.sock")
        self.url = "unix://" + self.sock
        self.running = False
        self.coordinator = None
        self._proc = None

    def open(self):
        lock_path = os.path.join(self.root, "redis", "read.lock")
        try:
            lock = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            lock = -1
        try:
            if lock >= 0:
                fcntl.flock(lock, fcntl.LOCK_EX)
            if _answers(self.sock):
                self.running = True
                self.coordinator = _control_endpoint(self.root)
            else:
                self._start()
        finally:
            if lock >= 0:
                os.close(lock)  # also releases the lock
        return self

    def _start(self):
        server = shutil.which("redis-server")
        if not server:
            raise CgqError("the state of a cgq run is in ./%s, and reading it needs redis-server, "
                           "which is not on PATH (apt-get install redis-server; or give redis= / "
                           "CGQ_REDIS to read another Redis)" % LOCAL_DIR)
        data = os.path.join(self.root, "redis")
        logs = os.path.join(self.root, "logs")
        os.makedirs(logs, exist_ok=True)
        log = os.path.join(logs, "redis-read.log")
        argv = [server, os.path.join(data, "redis.conf"), "--unixsocket", self.sock,
                "--dir", data, "--port", "0"]
        with open(log, "wb") as out:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        atexit.register(self.close)
        t0 = time.monotonic()
        noted = False
        while not _answers(self.sock):
            if self._proc.poll() is not None:
                self._proc = None
                raise CgqError("redis-server could not open the state of a cgq run in ./%s/redis "
                               "(%s: %s)" % (LOCAL_DIR, log, _last_line(log)))
            waited = time.monotonic() - t0
            if waited >= LOAD_TIMEOUT:
                self.close()
                raise CgqError("redis-server did not load ./%s/redis within %d s (see %s)"
                               % (LOCAL_DIR, LOAD_TIMEOUT, log))
            if waited >= LOAD_NOTE and not noted:
                sys.stderr.write("cgq: loading the state of a cgq run from ./%s/redis ...\n"
                                 % LOCAL_DIR)
                noted = True
            time.sleep(0.02)

    @property
    def started(self):
        return self._proc is not None

    def close(self):
        p, self._proc = self._proc, None
        if p is None or p.poll() is not None:
            return
        try:
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        except OSError:
            pass


def find(directory=None):
    """The LocalRun of directory (default: the working directory) when a
    `cgq run` left its state there, else None. Nothing is started."""
    d = os.path.abspath(directory or os.getcwd())
    root = os.path.join(d, LOCAL_DIR)
    if not os.path.isfile(os.path.join(root, "redis", "redis.conf")):
        return None
    return LocalRun(root)
