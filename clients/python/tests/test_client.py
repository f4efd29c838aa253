"""The cgq client library against real processes (conftest.py): the package
installed into a venv, a real redis-server, coordinator and workers, and the
real CLI to compare with.

- submit a dict and a file; job.trials() and job.to_pandas() are what
  `cgq results JOB --format json` / `--format csv` say; status, wait (with
  its progress line), best and top (min and max), pareto of a 2-objective job
  (the front `cgq results` lists), reports, logs (the trial directory, then
  the worker's log tail), cancel, events (replayed and live), jobs, workers;
- bad specs: SpecError with the coordinator's line and column; hostile
  dicts (NaN, bytes, text that is not UTF-8, a huge string, keys that are
  not text) refused with a clear message and nothing stored;
- a kill -9 of the coordinator: the client outlives it and its requests
  reach the next one (the fixture's restart, on the same ports); the raw
  request helper for code built on the client;
- CURVE on: a client with an allowed key works, one without keys or with
  another key is refused at once with what to configure;
- no coordinator: a clear error within the timeout (refused, and silent);
  no Redis: a clear error naming the URL;
- cgq.local() starts and stops a private cluster;
- to_pandas() without pandas says how to get it; an empty job's frame;
- the trial helpers still work as one copied file, and `import cgq` loads
  the standard library only.
"""

import csv
import io
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

import cgq
import harness

NOOP = {"name": "noop", "space": {"x": {"grid": [1, 2, 3, 4]}}, "search": {"algorithm": "grid"},
        "objective": {"metric": "score", "mode": "max"},
        "trial": {"kind": "noop", "resources": {"cpu": 1}}}


def sleeper(seconds, n=4):
    """A job of n trials that sleep; no objective, so they succeed with no metric."""
    return {"name": "sleeper", "space": {"i": {"grid": list(range(n))}},
            "search": {"algorithm": "grid"},
            "trial": {"command": "sleep %s" % seconds, "resources": {"cpu": 1}}}


# A trial that prints, reports three epochs on fd 3, and fails for k == 3.
TRIAL = r'''
import json, os, sys
p = json.loads(os.environ["CGQ_PARAMS"])
k = p["k"]
print("hello from trial k=%s" % k)
print("line two")
sys.stderr.write("warn k=%s\n" % k)
with os.fdopen(3, "w") as f:
    for e in range(1, 4):
        f.write(json.dumps({"epoch": e, "loss": 1.0 / (e + k), "state": "s%d" % e}) + "\n")
        f.flush()
if k == 3:
    sys.exit(3)
'''

SPEC = '''name: reporting
space:
  k: {grid: [1, 2, 3]}
  state: frozen
search: {algorithm: grid}
objective: {metric: loss, mode: min}
trial:
  command: python3 {spec_dir}/trial.py
  resources: {cpu: 1}
  timeout: 1m
'''


def results_json(cluster, job_id):
    r = cluster.cgq("results", job_id, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def free_port():
    return harness.free_port()


# ---------------------------------------------------------------- packaging


def test_installed_from_the_venv(installed):
    here = os.path.dirname(os.path.abspath(cgq.__file__))
    assert here.startswith(installed.site), (here, installed.site)
    # the venv's own interpreter: the generated schema is there, and `import
    # cgq` (what a trial does) loads the standard library only
    code = ("import sys, cgq; assert cgq.report and cgq.params;"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('zmq', 'redis', 'google', 'cgq.client', 'pandas'));"
            "assert not bad, bad;"
            "import cgq.cgq_pb2 as p; e = p.Envelope(version=1); e.ping.SetInParent();"
            "assert e.WhichOneof('body') == 'ping';"
            "import cgq_report; print(cgq.__file__)")
    r = subprocess.run([installed.python, "-c", code], capture_output=True, text=True,
                       timeout=60, cwd="/")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().startswith(installed.site), r.stdout


def test_trial_helpers_work_as_one_copied_file(tmp_path):
    # the installed trial.py, alone, as cgq.py beside a script
    shutil.copy(os.path.join(os.path.dirname(cgq.__file__), "trial.py"), tmp_path / "cgq.py")
    (tmp_path / "t.py").write_text(
        "import cgq, os\n"
        "assert os.path.dirname(os.path.abspath(cgq.__file__)) == os.getcwd(), cgq.__file__\n"
        "p = cgq.params()\n"
        "cgq.report(epoch=1, lr=p['lr'], nan=float('nan'))\n"
        "print(cgq.result(done=True))\n")
    rfd, wfd = os.pipe()
    try:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "CGQ_PARAMS": '{"lr": 0.5}',
               "CGQ_REPORT_FD": str(wfd), "CGQ_TRIAL_DIR": str(tmp_path)}
        r = subprocess.run([sys.executable, "-E", "-s", "t.py"], cwd=tmp_path, env=env,
                           pass_fds=(wfd,), capture_output=True, text=True, timeout=30)
        os.close(wfd)
        wfd = None
        with os.fdopen(rfd, "r") as f:
            lines = f.read().splitlines()
        rfd = None
    finally:
        for fd in (rfd, wfd):
            if fd is not None:
                os.close(fd)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in lines] == [{"epoch": 1, "lr": 0.5, "nan": None}]
    assert r.stdout.strip() == str(tmp_path / "result.json")
    assert json.loads((tmp_path / "result.json").read_text()) == {"done": True}


# ---------------------------------------------------------------- submit and read


def test_submit_dict_wait_and_read(cluster, client):
    job = client.submit(NOOP)
    assert isinstance(job, cgq.Job) and job.total == 4
    buf = io.StringIO()  # not a terminal: plain lines
    assert job.wait(progress=True, timeout=30, stream=buf) == "finished"
    assert "job %d" % job.id in buf.getvalue() and "4/4" in buf.getvalue(), buf.getvalue()
    st = job.status()
    assert st["state"] == "finished" and st["counts"]["succeeded"] == 4 and st["total"] == 4
    assert st["objective"] == {"metric": "score", "mode": "max"}
    assert st["best"] == {"trial": 3, "value": 4.0}
    assert st["spec_path"] == "<dict>" and st["spec_dir"] == os.getcwd()

    trials = job.trials()
    assert [t.id for t in trials] == [0, 1, 2, 3]
    t = trials[2]
    assert (t.state, t.params, t.metrics, t.value, t.attempt, t.node) == (
        "succeeded", {"x": 3}, {"x": 3, "score": 3}, 3.0, 1, "w1")
    assert t.started and t.finished >= t.started and t.duration is not None
    assert job.best().id == 3 and [x.id for x in job.top(3)] == [3, 2, 1]
    assert job.trial(1).params == {"x": 2}
    with pytest.raises(cgq.NotFound, match="job %d has no trial 9 .it has 4 so far" % job.id):
        job.trial(9)


def test_trials_and_pandas_match_the_cli(cluster, client):
    cluster.write_file("trial.py", TRIAL)
    spec = cluster.write_file("reporting.yaml", SPEC)
    job = client.submit(spec)
    assert job.wait(progress=False, timeout=60) == "finished"
    st = job.status()
    assert st["spec_path"] == spec and st["spec_dir"] == os.path.dirname(spec)
    assert st["counts"]["succeeded"] == 2 and st["counts"]["failed"] == 1

    doc = results_json(cluster, job.id)
    want = {t["id"]: t for t in doc["trials"]}
    got = {t.id: t for t in job.trials()}
    assert sorted(got) == sorted(want) == [0, 1, 2]
    for i, w in want.items():
        t = got[i]
        assert t.state == w["state"]
        assert t.params == w["params"]
        assert t.metrics == (w["metrics"] or {})
        assert t.attempts == w["attempts"] and t.node == w["node"]
        assert t.started == pytest.approx(w["started"])
        assert t.finished == pytest.approx(w["finished"])
        assert t.error == w["error"] and t.warning == w["warning"]
    assert "exit status 3" in got[2].error
    # min mode: trial 1 (k=2) has the lower loss
    assert job.best().id == 1 and [t.id for t in job.top(5)] == [1, 0]

    df = job.to_pandas()
    assert list(df["id"]) == [0, 1, 2]
    # the columns `cgq results --format csv` has, named as it names them: the
    # param "state" clashes with a built-in column, so it is params.state;
    # the metric "state" likewise metrics.state
    out = cluster.cgq("results", job.id, "--format", "csv")
    table = list(csv.reader(io.StringIO(out.stdout)))
    header = table[0]
    assert header[:3] == ["id", "state", "value"]
    assert [c for c in df.columns if c in header] == [c for c in header if c in df.columns]
    assert set(header) - {"attempts"} <= set(df.columns) and "attempts" in df.columns
    assert "params.state" in df.columns and "metrics.state" in df.columns and "k" in df.columns
    row = df[df["id"] == 1].iloc[0]
    assert row["state"] == "succeeded" and row["params.state"] == "frozen"
    assert row["value"] == pytest.approx(1.0 / 5) and row["loss"] == pytest.approx(1.0 / 5)
    assert row["metrics.state"] == "s3" and row["node"] == "w1"
    # value as the CSV has it (a failed trial's too, from its last report)
    for r in table[1:]:
        v = df[df["id"] == int(r[0])].iloc[0]["value"]
        assert (math.isnan(v) and r[2] == "") or v == pytest.approx(float(r[2])), (r, v)


def test_reports_and_logs(cluster, client):
    cluster.write_file("trial.py", TRIAL)
    job = client.submit(cluster.write_file("reporting.yaml", SPEC))
    assert job.wait(progress=False, timeout=60) == "finished"
    reps = job.reports(0)
    assert [r["epoch"] for r in reps] == [1, 2, 3]
    assert reps[2] == {"epoch": 3, "loss": 0.25, "state": "s3"}
    assert job.reports(99) == []
    # the trial directory is on this machine: its files, as `cgq logs` prints them
    assert job.logs(0) == "hello from trial k=1\nline two\n"
    assert job.logs(0, tail=1) == "line two\n"
    assert job.logs(0, "stderr") == "warn k=1\n"
    r = cluster.cgq("logs", job.id, 0)
    assert "hello from trial k=1" in r.stdout
    # not on this machine: the log tail the worker sent with the result
    t = job.trial(2)
    os.rename(t.trial_dir, t.trial_dir + ".away")
    assert "warn k=3" in job.logs(2)
    with pytest.raises(ValueError):
        job.logs(0, "stdin")
    with pytest.raises(cgq.NotFound):
        job.logs(7)


def test_bad_specs(cluster, client, tmp_path):
    before = cluster.jobs_in_redis()
    with pytest.raises(cgq.SpecError) as e:
        client.submit(dict(NOOP, sapce={}))
    err = e.value
    line = [i for i, x in enumerate(err.text.splitlines(), 1) if '"sapce"' in x]
    assert (err.path, err.line, err.col) == ("<dict>", line[0], 3), (str(err), err.line, err.col)
    assert "did you mean 'space'" in err.reason and err.code == 2
    assert '"sapce"' in str(err).splitlines()[1] and str(err).splitlines()[2].endswith("^")

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nspace:\n  x: {uniform: [0, 1]}\nsearch: {algorithm: random, "
                   "samples: 3}\nobjective: {metric: y, mode: max}\ntrial:\n  kind: noop\n"
                   "  resourcez: {cpu: 1}\n")
    with pytest.raises(cgq.SpecError) as e:
        client.submit(str(bad))
    assert e.value.path == str(bad) and e.value.line == 8 and e.value.col == 3, str(e.value)
    assert "resourcez" in str(e.value)
    with pytest.raises(cgq.SpecError, match="cannot read the spec"):
        client.submit(str(tmp_path / "missing.yaml"))
    with pytest.raises(TypeError):
        client.submit(b"name: x")
    assert cluster.jobs_in_redis() == before


def test_hostile_specs(cluster, client, tmp_path):
    before = cluster.jobs_in_redis()

    def refused(spec, match, c=client):
        with pytest.raises(cgq.SpecError, match=match) as e:
            c.submit(spec)
        assert "\n" not in e.value.message, e.value.message
        return e.value

    nan = dict(NOOP, space={"x": {"uniform": [0, float("nan")]}})
    refused(nan, r"space\.x\.uniform\[1\] is nan: a spec holds finite numbers only")
    refused(dict(NOOP, name=b"\xff\xfe"), r"name is bytes, not text")
    refused(dict(NOOP, name="bad \udcff text"), r"name is not valid text")
    refused(dict(NOOP, space={("a", 1): 1}), r"has the key \('a', 1\), which is not text")
    refused(dict(NOOP, space={"x": object()}), r"space\.x is a object, which is not a YAML value")
    refused(dict(NOOP, name="a\0b"), r"NUL")
    huge = dict(NOOP, name="x" * (2 << 20))
    refused(huge, r"longer than 1048576 bytes, the largest this client sends")
    # past this client's limit, the coordinator's --max-spec (1 MiB) refuses it
    big_client = cluster.new_client(max_spec="8M")
    e = refused(huge, r"over the 1 MiB limit of a spec \(--max-spec of the coordinator\); "
                "nothing was submitted", big_client)
    assert e.code == 2 and e.path == "<dict>"
    big_client.close()
    # a file that is not UTF-8, or holds a NUL byte
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    e = refused(str(tmp_path / "latin1.yaml"), r"latin1.yaml:1:10: the spec is not UTF-8 text")
    assert (e.line, e.col) == (1, 10)
    (tmp_path / "nul.yaml").write_bytes(b"name: a\nspace: {}\0\n")
    refused(str(tmp_path / "nul.yaml"), r"nul.yaml:2:10: the spec holds a NUL byte")
    assert cluster.jobs_in_redis() == before
    # and the coordinator is fine
    assert client.submit(NOOP).wait(progress=False, timeout=30) == "finished"


def test_progress_line_on_a_terminal(cluster, client):
    spec = sleeper(0.3, 6)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    job = client.submit(spec)
    with pytest.raises(cgq.Timeout, match="job %d is still running after 0.2s" % job.id):
        job.wait(progress=False, timeout=0.2)
    buf = Tty()
    assert job.wait(progress=True, timeout=30, stream=buf, interval=0.05) == "finished"
    out = buf.getvalue()
    assert out.startswith("\rjob %d" % job.id) and out.endswith("\n"), repr(out)
    assert out.count("\r") >= 2 and "6/6" in out.rsplit("\r", 1)[1]


def test_cancel(cluster, client):
    job = client.submit(sleeper(30))
    cluster.wait_for(lambda: job.status()["counts"]["running"] == 2, 20, "2 trials running")
    msg = job.cancel()
    assert "cancelled job %d" % job.id in msg, msg
    assert job.wait(progress=False, timeout=30) == "cancelled"
    assert job.status()["counts"]["cancelled"] == 4
    with pytest.raises(cgq.NotFound):
        cgq.Job(client, 999).cancel()
    with pytest.raises(cgq.NotFound, match="no job 999"):
        client.job(999)


def test_events_replayed_and_live(cluster, client):
    done = client.submit(NOOP)
    assert done.wait(progress=False, timeout=30) == "finished"
    evs = list(done.events(from_start=True, timeout=10))
    types = [e["type"] for e in evs]
    assert types[0] == "job.submitted" and types[-1] == "job.finished"
    assert sorted(e["trial"] for e in evs if e["type"] == "trial.running") == [0, 1, 2, 3]
    assert sorted(e["trial"] for e in evs if e["type"] == "trial.succeeded") == [0, 1, 2, 3]
    assert all(e["job"] == done.id for e in evs)
    assert all(e["node"] == "w1" for e in evs if e["type"] == "trial.running")
    assert list(done.events(timeout=5)) == []  # over already: nothing more comes

    slow = client.submit(sleeper(0.2))
    seen, t0 = [], time.monotonic()
    for e in slow.events(block_ms=200, timeout=30):  # from now on, live
        seen.append(e)
    assert time.monotonic() - t0 < 30 and seen and seen[-1]["type"] == "job.finished"
    assert {e["trial"] for e in seen if e["type"] == "trial.succeeded"} <= {0, 1, 2, 3}
    assert len([e for e in seen if e["type"] == "trial.succeeded"]) >= 2


def test_jobs_and_workers(cluster, client):
    a = client.submit(NOOP)
    b = client.submit(NOOP)
    assert [j.id for j in client.jobs()][:2] == [b.id, a.id]
    assert [j.id for j in client.jobs(limit=1)] == [b.id]
    assert client.job(a.id) == a
    assert client.ping() >= 1
    cluster.start_worker("w2", cpus=1)
    ws = {w["id"]: w for w in client.workers()}
    assert sorted(ws) == ["w1", "w2"]
    assert ws["w1"]["state"] == "alive" and ws["w1"]["cpus"] == 2 and ws["w2"]["cpus"] == 1
    assert ws["w1"]["kind"] == "worker" and not ws["w1"]["stale"]
    cluster.kill_worker("w2")
    cluster.wait_for(lambda: {w["id"]: w["state"] for w in client.workers()}["w2"] == "dead",
                     20, "w2 to be dead")


def test_across_a_coordinator_restart(cluster, client):
    """A fresh socket per request: the client outlives a kill -9 of the
    coordinator; the fixture's restart reuses the ports, so workers and
    clients find the new one. The raw request helper, for code built on
    the client."""
    job = client.submit(sleeper(1.0, 4))
    cluster.wait_for(lambda: job.status()["counts"]["running"] == 2, 20, "2 trials running")
    epoch = client.ping()
    cluster.kill9_coordinator()
    with pytest.raises(cgq.ConnectionError, match="cannot reach the coordinator"):
        client.ping(timeout=1)
    cluster.start_coordinator()
    assert client.ping() > epoch
    assert job.wait(progress=False, timeout=40) == "finished"
    assert job.status()["counts"]["succeeded"] == 4
    epoch = client.ping()
    cluster.restart_coordinator(kill=False)  # SIGTERM (it must exit 0), then a new one
    assert client.ping() > epoch
    reply = client.request("ping")
    assert reply.WhichOneof("body") == "reply" and reply.reply.code == 0
    with pytest.raises(cgq.RequestError) as e:
        client.request("cancel_job", job=999)
    assert e.value.code == 2
    msg = client.pb2.CancelJob(job=job.id)
    assert client.request("cancel_job", msg).reply.code == 0  # over already: nothing to do
    with pytest.raises(cgq.CgqError, match="no request 'nonsense'"):
        client.request("nonsense")


def test_pareto_of_two_objectives(cluster, client):
    spec = {"name": "front", "space": {"x": {"grid": [1, 2, 3]}, "y": {"grid": [1, 2, 3]}},
            "search": {"algorithm": "grid"},
            "objectives": [{"metric": "x", "mode": "min"}, {"metric": "y", "mode": "max"}],
            "trial": {"kind": "noop", "resources": {"cpu": 1}}}
    job = client.submit(spec)
    assert job.wait(progress=False, timeout=30) == "finished"
    front = job.pareto()
    # min x, max y: only x=1, y=3 is on the front
    assert [(t.params["x"], t.params["y"]) for t in front] == [(1, 3)]
    assert front[0].objectives == {"x": 1, "y": 3}
    assert sorted(t.id for t in front) == sorted(results_json(cluster, job.id)["front"])
    assert job.best() is None and job.status()["objective"] is None
    one = client.submit(NOOP)
    with pytest.raises(cgq.CgqError, match="has one objective"):
        one.pareto()


def test_curve(make_cluster, tmp_path):
    keys, allow = tmp_path / "keys", tmp_path / "allow"
    allow.mkdir()

    def keygen(name, *extra):
        r = subprocess.run([harness.binary("cgq"), "keygen", name, "--dir", str(keys)]
                           + list(extra), capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return str(keys / (name + ".key")), str(keys / (name + ".key_secret"))

    coord_pub, coord_sec = keygen("coordinator")
    w1_pub, w1_sec = keygen("w1")
    alice_pub, alice_sec = keygen("alice", "--nodes", "none")
    _, mallory_sec = keygen("mallory", "--nodes", "none")
    shutil.copy(w1_pub, allow)
    shutil.copy(alice_pub, allow)
    c = make_cluster(workers=(), coordinator_args=("--curve-secret", coord_sec,
                                                   "--curve-allow", str(allow)))
    c.start_worker("w1", cpus=2, extra=("--curve-secret", w1_sec, "--curve-server", coord_pub))
    alice = c.new_client(curve_secret=alice_sec, curve_server=coord_pub)
    job = alice.submit(NOOP)
    assert job.wait(progress=False, timeout=30) == "finished"
    alice.close()

    for kw, match in (({}, "requires CURVE authentication"),
                      ({"curve_secret": mallory_sec, "curve_server": coord_pub},
                       "refused this client's CURVE key")):
        cl = c.new_client(timeout=10, **kw)
        t0 = time.monotonic()
        with pytest.raises(cgq.ConnectionError, match=match) as e:
            cl.submit(NOOP)
        assert time.monotonic() - t0 < 5, "refused at once, not after the timeout"
        assert c.control in str(e.value)
        cl.close()
    with pytest.raises(cgq.CgqError, match="CURVE needs both keys"):
        c.new_client(curve_secret=alice_sec)
    with pytest.raises(cgq.CgqError, match="holds no secret key"):
        c.new_client(curve_secret=alice_pub, curve_server=coord_pub)
    assert [j for j in c.jobs_in_redis()] == [str(job.id)]


def test_no_coordinator_and_no_redis():
    port = free_port()
    c = cgq.Client(redis="redis://127.0.0.1:%d/0" % port, coordinator="tcp://127.0.0.1:%d" % port,
                   curve_secret="", curve_server="", timeout=3)
    t0 = time.monotonic()
    with pytest.raises(cgq.ConnectionError, match=r"cannot reach the coordinator at "
                       r"tcp://127.0.0.1:%d: connection refused \(is cgq-coordinator running\? "
                       r"check coordinator= / CGQ_COORDINATOR\)" % port):
        c.submit(NOOP)
    assert time.monotonic() - t0 < 2.5
    with pytest.raises(cgq.ConnectionError, match=r"cannot reach Redis at "
                       r"redis://127.0.0.1:%d/0: .*check redis= / CGQ_REDIS" % port):
        c.jobs()
    c.close()

    # something listens, but no coordinator answers: the timeout, then the error
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        ep = "tcp://127.0.0.1:%d" % s.getsockname()[1]
        silent = cgq.Client(coordinator=ep, curve_secret="", curve_server="", timeout=1.0)
        t0 = time.monotonic()
        with pytest.raises(cgq.ConnectionError, match="cannot reach the coordinator at %s "
                           "within 1s" % ep):
            silent.ping()
        assert 0.9 < time.monotonic() - t0 < 3
        silent.close()
    with pytest.raises(cgq.CgqError, match="bad Redis URL 'http://x'"):
        cgq.Client(redis="http://x")


def test_local_cluster(tmp_path):
    with cgq.local(workers=2, cpus=1, gpus="none") as c:
        cl = c.local
        assert os.path.isdir(cl.dir) and cl.control.startswith("tcp://127.0.0.1:")
        pids = [p.pid for p in cl.procs.values()]
        assert len(pids) == 4  # redis, coordinator, two workers
        job = c.submit(NOOP)
        assert job.wait(progress=False, timeout=30) == "finished"
        assert job.best().params == {"x": 4}
        assert {w["id"] for w in c.workers()} == {"local-1", "local-2"}
        where = cl.dir
    for pid in pids:
        assert not harness.pid_alive(pid), "pid %d still runs after cgq.local()" % pid
    assert not os.path.exists(where)
    with pytest.raises(cgq.CgqError, match="cannot find cgq-coordinator"):
        with cgq.local(workers=0, bin_dir="/nonexistent", dir=str(tmp_path / "kept")):
            pass
    assert os.path.isfile(tmp_path / "kept" / "logs" / "redis.stdout.log")  # kept: it failed
    assert not harness.my_children(), "the Redis it started is stopped"


def test_reads_the_state_a_cgq_run_left(tmp_path, monkeypatch, capfd):
    """A Client made where `cgq run` ran, with no redis= and no CGQ_REDIS,
    reads that run: through a redis-server it starts on ./.cgq/redis and
    stops at close(); a second client meanwhile uses the first's server and
    leaves it running."""
    spec = tmp_path / "tune.yaml"
    spec.write_text(json.dumps(dict(NOOP, name="left-behind")))
    env = dict(os.environ)
    for k in ("CGQ_REDIS", "CGQ_COORDINATOR"):
        env.pop(k, None)
    r = subprocess.run([harness.binary("cgq"), "run", "--workers", "1", str(spec)],
                       cwd=str(tmp_path), env=env, capture_output=True, text=True,
                       timeout=120 * harness.SPEED)
    assert r.returncode == 0, r.stderr[-3000:]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CGQ_REDIS", raising=False)
    monkeypatch.delenv("CGQ_COORDINATOR", raising=False)
    sock = str(tmp_path / ".cgq" / "redis.sock")
    c = cgq.Client(curve_secret="", curve_server="")
    assert c.local_run is not None and c.local_run.started
    assert c.redis_url == "unix://" + sock
    assert "reading the state of the cgq run in ./.cgq (redis=" in capfd.readouterr().err
    job = c.job(1)
    assert job.status()["state"] == "finished"
    assert sorted(t.params["x"] for t in job.trials()) == [1, 2, 3, 4]
    assert job.best().params == {"x": 4}
    other = cgq.Client(curve_secret="", curve_server="")
    assert other.local_run is not None and not other.local_run.started
    assert "which is running" in capfd.readouterr().err
    other.close()
    assert len(c.jobs()) == 1, "the first client's server is not stopped by the second's close"
    pid = c.local_run._proc.pid
    c.close()
    assert not harness.pid_alive(pid), "close() stops the redis-server it started"
    # redis= still wins, and elsewhere nothing is looked for
    port = free_port()
    explicit = cgq.Client(redis="redis://127.0.0.1:%d/0" % port, curve_secret="",
                          curve_server="")
    assert explicit.local_run is None
    explicit.close()
    monkeypatch.chdir(tmp_path / ".cgq")
    assert cgq.Client(curve_secret="", curve_server="").local_run is None


# ---------------------------------------------------------------- units (no processes)


def test_redis_urls():
    from cgq.client import mask_url, redis_kwargs
    assert redis_kwargs("redis://127.0.0.1:7000/3") == {"host": "127.0.0.1", "port": 7000, "db": 3}
    assert redis_kwargs("redis://u:p%40ss@h/1") == {"host": "h", "port": 6379, "db": 1,
                                                    "username": "u", "password": "p@ss"}
    assert redis_kwargs("redis://secret@h")["password"] == "secret"
    assert redis_kwargs("redis://[::1]:7/0")["host"] == "::1"
    assert redis_kwargs("unix:///run/r.sock?db=2&user=u&password=p") == {
        "unix_socket_path": "/run/r.sock", "db": 2, "username": "u", "password": "p"}
    assert redis_kwargs("sentinel://u:p%40ss@h1:26380,h2,[::1]:5/mymaster/2") == {
        "sentinels": [("h1", 26380), ("h2", 26379), ("::1", 5)], "service_name": "mymaster",
        "db": 2, "username": "u", "password": "p@ss"}
    for bad, why in (("sentinel://h1", "MASTER_NAME"), ("sentinel://h1/", "master name"),
                     ("sentinel://h1,,h2/m", "without a host"), ("sentinel://h:0/m", "port"),
                     ("sentinel://h/m/x", "database"), ("sentinel:///m", "no sentinel")):
        with pytest.raises(cgq.CgqError, match=why):
            redis_kwargs(bad)
    assert mask_url("redis://u:secret@h:1/0") == "redis://u:***@h:1/0"
    assert mask_url("unix:///s?password=x&db=1") == "unix:///s?password=***&db=1"
    for bad, why in (("redis://h:99999", "port"), ("unix://rel", "absolute"),
                     ("redis://h/x", "database"), ("unix:///s?foo=1", "unknown query")):
        with pytest.raises(cgq.CgqError, match=why):
            redis_kwargs(bad)


def test_spec_error_fields():
    e = cgq.SpecError("a:b.yaml:12:7: unknown key 'x'", path="a:b.yaml",
                      text="\n" * 11 + "  y: x\n")
    assert (e.path, e.line, e.col, e.reason) == ("a:b.yaml", 12, 7, "unknown key 'x'")
    assert str(e).splitlines()[1:] == ["      y: x", "          ^"]
    e = cgq.SpecError("<dict>: spec is 2 MiB, over the 1 MiB limit", path="<dict>")
    assert (e.line, e.col, e.reason) == (None, None, "spec is 2 MiB, over the 1 MiB limit")
    assert isinstance(e, ValueError) and isinstance(e, cgq.CgqError)
    assert str(cgq.NotFound("no job 7")) == "no job 7"


def test_to_pandas_without_pandas(monkeypatch):
    c = cgq.Client(redis="redis://127.0.0.1:1/0", coordinator="tcp://127.0.0.1:1",
                   curve_secret="", curve_server="")
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` fails
    with pytest.raises(ImportError, match="needs pandas: apt-get install python3-pandas"):
        cgq.Job(c, 1).to_pandas()
    c.close()


def test_empty_frame():
    import pandas as pd
    from cgq.job import Job
    df = Job._frame(pd, [])
    assert df.shape == (0, 9) and list(df.columns)[:3] == ["id", "state", "value"]
    assert str(df["value"].dtype) == "float64"
