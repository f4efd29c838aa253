"""Fixtures of the cgq Python package's tests (clients/python/tests).

Packaging is tested for real: before any test is collected, pytest_configure
makes a venv (--system-site-packages) in a temporary directory, installs
clients/python into it with `pip install --no-index` (offline: the in-tree
build backend, Debian's pyzmq, protobuf and redis), and puts that venv's
site-packages first on sys.path, so `import cgq` in every test module is the
installed package, never the source tree (checked). CGQ_TEST_VENV=DIR reuses
an existing venv with the package installed instead.

Clusters are real processes (tests/integration/harness.py): a redis-server
on a free loopback port, cgq-coordinator on kernel-chosen ports, cgq-workers;
binaries from $CGQ_BIN_DIR (else build/bin). Fixtures:

  installed      the venv: .venv, .python, .site (session)
  make_cluster   make_cluster(workers=(("w1", 2),), coordinator_args=(),
                 heartbeat="200ms", appendonly=False, client_timeout=5.0,
                 durable_after="0") -> a ClusterFixture, stopped after the test
                 (daemons must exit 0 and leave no sanitizer report, or the
                 test fails); durable_after is the coordinator's
                 --durable-after (None: its default, 3s, which holds each
                 worker's shutdown 3 s for its last Acks)
  cluster        make_cluster() with its defaults: Redis, a coordinator and
                 one worker w1 with 2 CPU slots
  client         cluster.client

A ClusterFixture has .redis_url, .control (control endpoint), .nodes (node
endpoint), .client (a cgq.Client on them), .redis (harness's raw Redis
client), .tmp, .specdir, and start_worker(wid, cpus=2, ...),
kill_worker(wid) (SIGKILL), kill9_coordinator(), start_coordinator() (on the
same ports, so workers and clients reconnect), restart_coordinator(kill=True),
cgq(*args) (the CLI, as a CompletedProcess with text), write_file(name, text),
wait_for(fn, timeout, what), jobs_in_redis(), and .harness (the
harness.Cluster itself).

Every test runs under an alarm (CGQ_PY_TEST_TIMEOUT, default 90 s): a test
that hangs fails instead of holding ctest until its own timeout.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_DIR = os.path.dirname(HERE)                              # clients/python
REPO = os.path.dirname(os.path.dirname(PKG_DIR))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import harness  # noqa: E402

TEST_TIMEOUT = float(os.environ.get("CGQ_PY_TEST_TIMEOUT", "90")) * harness.SPEED


class Installed:
    def __init__(self, venv, made):
        self.venv = venv
        self.made = made
        self.python = os.path.join(venv, "bin", "python")
        out = subprocess.run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError("the venv's python does not run: %s" % out.stderr)
        self.site = out.stdout.strip()


_installed = None


def _make_venv():
    tmp = tempfile.mkdtemp(prefix="cgq-pytest-venv-")
    venv = os.path.join(tmp, "venv")
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("python3 -m venv failed (apt-get install python3-venv):\n%s%s"
                           % (r.stdout, r.stderr))
    # The documented command, with --no-index: nothing may come from the network.
    r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index",
                        "--disable-pip-version-check", PKG_DIR],
                       capture_output=True, text=True, timeout=300, cwd=tmp)
    if r.returncode != 0:
        raise RuntimeError("pip install --no-index %s failed:\n%s%s" % (PKG_DIR, r.stdout,
                                                                       r.stderr))
    return venv


def pytest_configure(config):
    global _installed
    if _installed is not None:
        return
    venv = os.environ.get("CGQ_TEST_VENV")
    made = not venv
    if made:
        venv = _make_venv()
    _installed = Installed(venv, made)
    # The source tree must not shadow the installed package.
    sys.path[:] = [p for p in sys.path
                   if os.path.abspath(p or os.getcwd()) != PKG_DIR]
    sys.path.insert(0, _installed.site)
    for name in [m for m in sys.modules if m == "cgq" or m.startswith("cgq.")]:
        del sys.modules[name]
    import cgq
    where = os.path.dirname(os.path.abspath(cgq.__file__))
    if not where.startswith(os.path.abspath(_installed.site) + os.sep):
        raise RuntimeError("cgq was imported from %s, not from the venv %s" % (where, venv))


def pytest_unconfigure(config):
    if _installed is not None and _installed.made and not os.environ.get("CGQ_KEEP_TMP"):
        shutil.rmtree(os.path.dirname(_installed.venv), ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    # ctest's SKIP_RETURN_CODE: every test skipped (binaries not built)
    rep = session.config.pluginmanager.get_plugin("terminalreporter")
    if rep is not None and exitstatus == 0:
        passed = len(rep.stats.get("passed", []))
        skipped = len(rep.stats.get("skipped", []))
        if skipped and not passed:
            session.exitstatus = 77


@pytest.fixture(scope="session")
def installed():
    return _installed


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture(autouse=True)
def _bounded():
    """Fails a test that runs past TEST_TIMEOUT (SIGALRM in the main thread)."""
    def expired(signum, frame):
        raise TimeoutError("the test ran past %gs (CGQ_PY_TEST_TIMEOUT)" % TEST_TIMEOUT)

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, TEST_TIMEOUT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class ClusterFixture:
    """A harness.Cluster with a cgq.Client on it (see the module docstring)."""

    def __init__(self, tmp, client_timeout=5.0):
        self.tmp = tmp
        self.harness = harness.Cluster(tmp)
        self.specdir = self.harness.specdir
        self.client_timeout = client_timeout
        self.client = None
        self.coordinator_args = ()
        self.heartbeat = "200ms"

    # endpoints and handles
    @property
    def redis_url(self):
        return self.harness.redis_url

    @property
    def redis(self):
        return self.harness.redis

    @property
    def control(self):
        return self.harness.control_ep

    @property
    def nodes(self):
        return self.harness.nodes_ep

    def new_client(self, **kw):
        import cgq
        kw.setdefault("redis", self.redis_url)
        kw.setdefault("coordinator", self.control)
        kw.setdefault("curve_secret", "")
        kw.setdefault("curve_server", "")
        kw.setdefault("timeout", self.client_timeout)
        return cgq.Client(**kw)

    # processes
    def start(self, workers, coordinator_args, heartbeat, appendonly):
        self.coordinator_args, self.heartbeat = tuple(coordinator_args), heartbeat
        self.harness.start_redis(appendonly=appendonly)
        self.start_coordinator()
        for wid, cpus in workers:
            self.start_worker(wid, cpus=cpus)
        self.client = self.new_client()

    def start_coordinator(self, extra=()):
        """Starts a coordinator; after the first, on the first one's ports."""
        args = list(self.coordinator_args) + list(extra)
        if self.harness.nodes_ep:
            args += ["--bind", self.harness.nodes_ep, "--control", self.harness.control_ep]
        return self.harness.start_coordinator(extra=args, heartbeat=self.heartbeat)

    def kill9_coordinator(self):
        self.harness.coordinator.kill9()

    def restart_coordinator(self, kill=True, extra=()):
        """kill -9 (else SIGTERM) the coordinator and start another on the
        same ports and Redis; returns it (its ready line's epoch is .epoch)."""
        if kill:
            self.kill9_coordinator()
        else:
            problem = self.harness.coordinator.stop()
            if problem:
                raise AssertionError(problem)
        return self.start_coordinator(extra)

    def start_worker(self, wid="w1", cpus=2, **kw):
        return self.harness.start_worker(wid, cpus=cpus, **kw)

    def kill_worker(self, wid):
        self.harness.workers[wid].kill9()

    def cgq(self, *args, **kw):
        return self.harness.cgq(*args, **kw)

    def write_file(self, name, text, mode=0o644):
        return self.harness.write_file(name, text, mode)

    def wait_for(self, fn, timeout, what, interval=0.05):
        return self.harness.wait_for(fn, timeout, what, interval)

    def jobs_in_redis(self):
        return self.harness.redis.cmd("ZRANGE", "cgq:jobs", 0, -1) or []

    def stop(self):
        if self.client is not None:
            self.client.close()
        return self.harness.stop()


@pytest.fixture
def make_cluster(request):
    made = []

    def make(workers=(("w1", 2),), coordinator_args=(), heartbeat="200ms", appendonly=False,
             client_timeout=5.0, durable_after="0"):
        tmp = tempfile.mkdtemp(prefix="cgq-pytest-%s-" % request.node.name[:40])
        c = ClusterFixture(tmp, client_timeout)
        made.append(c)
        # --durable-after 0: results are acked at once (the default 3 s holds
        # every worker's shutdown for 3 s waiting for its last Acks)
        args = (("--durable-after", durable_after) if durable_after is not None else ()) + \
            tuple(coordinator_args)
        c.start(workers, args, heartbeat, appendonly)
        return c

    yield make
    problems = []
    for c in made:
        problems.extend(c.stop())
    rep = getattr(request.node, "rep_call", None)
    failed = problems or (rep is not None and rep.failed)
    for c in made:
        if failed or os.environ.get("CGQ_KEEP_TMP"):
            sys.stderr.write("\n===== %s: logs kept in %s\n%s\n" % (
                request.node.nodeid, c.tmp, c.harness.log_tails() if failed else ""))
        else:
            shutil.rmtree(c.tmp, ignore_errors=True)
    if problems:
        pytest.fail("teardown found problems:\n  " + "\n  ".join(problems))


@pytest.fixture
def cluster(make_cluster):
    return make_cluster()


@pytest.fixture
def client(cluster):
    return cluster.client
