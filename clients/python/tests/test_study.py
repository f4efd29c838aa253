"""Ask-and-tell studies (cgq/study.py, cgq/_node.py) against real processes.

A study is a job with trial: {kind: client} whose trials run in the asking
process, which the coordinator sees as a client node. These tests start a
real redis-server and cgq-coordinator (tests/integration/harness.py) and
check what a researcher relies on: the job's searcher and early stopper
drive the loop, nothing is counted twice, a trial not told in time or held
by a process that dies goes back to the queue, a study outlives a
coordinator kill -9 and is reopened by name, CURVE works, and bad metrics
are refused whole.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import harness  # noqa: E402

import cgq  # noqa: E402
from cgq.study import StudyError  # noqa: E402

SPACE = {"lr": {"loguniform": [1e-4, 1e-1]}, "layers": {"randint": [2, 6]}}


@pytest.fixture
def cl(tmp_path):
    c = harness.Cluster(str(tmp_path))
    c.start_redis(appendonly=True)
    c.start_coordinator(extra=["--durable-after", "0"])
    yield c
    problems = c.stop()
    assert not problems, problems


def client_of(c, **kw):
    return cgq.Client(redis=c.redis_url, coordinator=c.control_ep, **kw)


def job_hash(c, job):
    return c.redis.hgetall("cgq:job:{%d}" % job)


def trial_hash(c, job, trial):
    return c.redis.hgetall("cgq:job:{%d}:trial:%d" % (job, trial))


def wait_for(pred, timeout=20.0, what="condition"):
    end = time.monotonic() + timeout * harness.SPEED
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def loss_of(p):
    return (p["lr"] - 0.01) ** 2 + 0.001 * p["layers"]


def test_ask_tell_100_with_asha(cl):
    c = client_of(cl)
    study = c.study(name="cg", space=SPACE, objective={"metric": "loss", "mode": "min"},
                    search={"algorithm": "random", "seed": 1, "samples": 100},
                    early_stop={"algorithm": "asha", "metric": "loss", "mode": "min",
                                "time_attr": "epoch", "grace": 1, "reduction": 2, "max_t": 8})
    seen, stopped = set(), set()
    while True:
        t = study.ask(wait=20)
        if t is None:
            break
        assert t.id not in seen, "trial %d asked twice" % t.id
        seen.add(t.id)
        assert set(t.params) == {"lr", "layers"}
        loss = loss_of(t.params)
        for epoch in range(1, 9):
            t.report(epoch=epoch, loss=loss * (1 + 1.0 / epoch))
            time.sleep(0.01)  # an epoch: the Stop comes back within a round trip
            if t.should_stop():
                stopped.add(t.id)
                break
        told = study.tell(t, loss=loss)
        assert told == ("stopped" if t.id in stopped else "succeeded")
    study.close()
    assert seen == set(range(100))
    h = job_hash(cl, study.id)
    assert h["state"] == "finished"
    assert int(h["succeeded"]) + int(h["stopped"]) == 100
    # Every trial the client saw stopped is stopped; a Stop that came after
    # the trial's last report was still recorded by the coordinator.
    assert 0 < len(stopped) <= int(h["stopped"]), (h["stopped"], stopped)
    for tid in stopped:
        assert trial_hash(cl, study.id, tid)["state"] == "stopped"
    # The views see a study's trials like any other job's.
    out = cl.cgq("results", str(study.id), "--format", "json")
    rows = json.loads(out.stdout)
    rows = rows["trials"] if isinstance(rows, dict) else rows
    assert len(rows) == 100
    assert {r["id"] for r in rows} == set(range(100))
    done = [r for r in rows if r["state"] == "succeeded"]
    assert done and all(r["metrics"]["loss"] == loss_of(r["params"]) for r in done)


def test_no_trial_starts_unasked(cl):
    """After a tell, nothing runs until the next ask (want shrinks first)."""
    c = client_of(cl)
    study = c.study(name="s", space=SPACE, objective={"metric": "loss", "mode": "min"},
                    search={"algorithm": "random", "seed": 2, "samples": 10})
    for _ in range(3):
        t = study.ask(wait=20)
        study.tell(t, loss=loss_of(t.params))
    time.sleep(1.0)  # a few heartbeats: a trial assigned unasked would show up
    h = job_hash(cl, study.id)
    assert h["running"] == "0" and h["succeeded"] == "3", h
    assert h["suggested"] == "3", h
    study.close()


def test_tell_twice_unknown_and_hostile(cl):
    c = client_of(cl)
    study = c.study(name="h", space=SPACE, objective={"metric": "loss", "mode": "min"},
                    search={"algorithm": "random", "seed": 3, "samples": 5})
    t = study.ask(wait=20)
    with pytest.raises(StudyError, match="finite"):
        study.tell(t, loss=float("nan"))
    with pytest.raises(StudyError, match="finite"):
        t.report(epoch=1, loss=float("inf"))
    with pytest.raises(StudyError, match="UTF-8"):
        study.tell(t, loss=1.0, note="bad \udcff text")
    with pytest.raises(StudyError, match="bytes"):
        study.tell(t, loss=1.0, blob=b"\xff\xfe")
    with pytest.raises(StudyError, match="more than"):
        study.tell(t, loss=1.0, log="x" * (2 << 20))
    with pytest.raises(StudyError, match="needs its metrics"):
        study.tell(t)
    with pytest.raises(StudyError, match="ask\\(\\) returned"):
        study.tell(t.id, loss=1.0)
    # Nothing of the refused tells was stored: the trial still runs.
    assert trial_hash(cl, study.id, t.id)["state"] == "running"
    assert study.tell(t, loss=0.5, note="fine") == "succeeded"
    with pytest.raises(StudyError, match="already told"):
        study.tell(t, loss=0.4)
    h = wait_for(lambda: trial_hash(cl, study.id, t.id).get("state") == "succeeded"
                 and trial_hash(cl, study.id, t.id), what="the tell recorded")
    assert json.loads(h["metrics"]) == {"loss": 0.5, "note": "fine"}
    assert job_hash(cl, study.id)["succeeded"] == "1"
    # A failure, as told: with retries 0 the trial fails with that error.
    t2 = study.ask(wait=20)
    study.tell(t2, state="failed", error="CUDA out of memory")
    h2 = wait_for(lambda: trial_hash(cl, study.id, t2.id).get("state") == "failed"
                  and trial_hash(cl, study.id, t2.id), what="the failure recorded")
    assert "CUDA out of memory" in h2["error"]
    study.close()


def test_ask_timeout_requeues(cl):
    c = client_of(cl)
    study = c.study(name="t", space=SPACE, objective={"metric": "loss", "mode": "min"},
                    search={"algorithm": "random", "seed": 4, "samples": 3})
    t = study.ask(wait=20, timeout=0.5)
    time.sleep(1.5)
    # Given back: the same trial comes again as its next attempt.
    t2 = study.ask(wait=20)
    assert (t2.id, t2.attempt) == (t.id, t.attempt + 1)
    assert t2.params == t.params
    with pytest.raises(StudyError, match="not told within its timeout"):
        study.tell(t, loss=1.0)
    study.tell(t2, loss=loss_of(t2.params))
    h = wait_for(lambda: trial_hash(cl, study.id, t.id).get("state") == "succeeded"
                 and trial_hash(cl, study.id, t.id), what="the second attempt recorded")
    assert h["attempt"] == str(t2.attempt)
    study.close()


def test_attach_to_a_worker_job_is_refused(cl):
    c = client_of(cl)
    spec = cl.write_file("w.yaml", harness.noop_spec("w", 3))
    job = int(cl.submit(spec))
    from cgq.study import Study
    with pytest.raises(StudyError, match="not in a client"):
        Study(c, job).ask(wait=5)
    # A Hello for a job id that never was (a stranger's guess): refused too,
    # with the coordinator still serving the worker job afterwards.
    with pytest.raises(StudyError, match="job 999 is not running"):
        s = Study(c, 999)
        s._ended = lambda: False  # past the client's own Redis check: the Hello itself
        s.ask(wait=5)
    cl.start_worker("w1", cpus=2)
    assert cl.wait_job(job, timeout=30)["state"] == "finished"


DYING = r'''
import os, sys, time
sys.path[:0] = %(path)r
import cgq
c = cgq.Client(redis=%(redis)r, coordinator=%(ctl)r)
s = c.study(name="dies")
t = s.ask(wait=20)
print(t.id, t.attempt, flush=True)
time.sleep(60)
'''


def test_process_death_and_reopen_after_coordinator_kill(cl):
    """A study reopened by name in another process; the asking process
    killed -9 (its trial goes back to the queue); the coordinator killed -9
    and restarted under a held trial (adopted; the tell counts once)."""
    c = client_of(cl)
    study = c.study(name="dies", space=SPACE, objective={"metric": "loss", "mode": "min"},
                    search={"algorithm": "random", "seed": 5, "samples": 6})
    code = DYING % {"path": sys.path[:3] + [os.path.dirname(os.path.dirname(cgq.__file__))],
                    "redis": cl.redis_url, "ctl": cl.control_ep}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        tid, attempt = map(int, p.stdout.readline().split())
        assert (tid, attempt) == (0, 1)
        wait_for(lambda: trial_hash(cl, study.id, 0).get("state") == "running",
                 what="trial 0 running in the other process")
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    # Our own ask meanwhile gets the next trial.
    t = study.ask(wait=30)
    assert (t.id, t.attempt) == (1, 1)
    # Kill the coordinator under the held trial; restart it; tell.
    cl.coordinator.kill9()
    cl.start_coordinator(extra=["--durable-after", "0",
                                "--bind", "tcp://127.0.0.1:%d" % harness.endpoint_port(cl.nodes_ep),
                                "--control",
                                "tcp://127.0.0.1:%d" % harness.endpoint_port(cl.control_ep)])
    study.tell(t, loss=loss_of(t.params))
    h = wait_for(lambda: trial_hash(cl, study.id, 1).get("state") == "succeeded"
                 and trial_hash(cl, study.id, 1), timeout=30, what="trial 1 adopted and told")
    assert h["attempt"] == "1"
    # A second process's view of the same study, by name, finishes it.
    other = client_of(cl).study(name="dies")
    assert other.id == study.id
    got = []
    while True:
        t = other.ask(wait=30)
        if t is None:
            break
        other.tell(t, loss=loss_of(t.params))
        got.append((t.id, t.attempt))
    # The dead process's trial came back as its second attempt, once.
    assert sorted(got) == [(0, 2), (2, 1), (3, 1), (4, 1), (5, 1)], got
    other.close()
    study.close()
    h = job_hash(cl, study.id)
    assert h["state"] == "finished" and h["succeeded"] == "6", h


def test_curve(cl, tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()

    def keygen(name, nodes=None):
        cmd = [harness.binary("cgq"), "keygen", name, "--dir", str(keys)]
        if nodes:
            cmd += ["--nodes", nodes]
        subprocess.run(cmd, check=True, capture_output=True)
        return str(keys / (name + ".key")), str(keys / (name + ".key_secret"))

    coord_pub, coord_sec = keygen("coordinator")
    alice_pub, alice_sec = keygen("alice")
    allow = tmp_path / "allow"
    allow.mkdir()
    os.link(alice_pub, allow / "alice.key")
    cl.coordinator.stop()
    cl.start_coordinator(extra=["--durable-after", "0", "--curve-secret", coord_sec,
                                "--curve-allow", str(allow)])
    c = client_of(cl, curve_secret=alice_sec, curve_server=coord_pub)
    study = c.study(name="curved", space=SPACE, objective={"metric": "loss", "mode": "min"},
                    search={"algorithm": "random", "seed": 6, "samples": 3})
    for _ in range(2):
        t = study.ask(wait=20)
        assert study._node.node_id.startswith("alice-")
        study.tell(t, loss=loss_of(t.params))
    # Without keys no client gets through to the same job.
    from cgq.study import Study
    stranger = Study(client_of(cl), study.id)
    with pytest.raises(TimeoutError):
        stranger.ask(wait=2)
    stranger.close(wait_acks=0)
    t = study.ask(wait=20)
    study.tell(t, loss=loss_of(t.params))
    assert study.ask(wait=20) is None
    study.close()
    h = job_hash(cl, study.id)
    assert h["state"] == "finished" and h["succeeded"] == "3", h


def test_multi_objective_and_bayes(cl):
    """Searchers that learn from results (nsga2, bayes) drive a study too;
    a study with two objectives keeps its Pareto front."""
    c = client_of(cl)
    mo = c.study(name="mo", space=SPACE,
                 objectives=[{"metric": "loss", "mode": "min"}, {"metric": "ms", "mode": "min"}],
                 search={"algorithm": "nsga2", "seed": 7, "samples": 24, "population": 8})
    n = 0
    while (t := mo.ask(wait=20)) is not None:
        if n == 0:
            with pytest.raises(StudyError, match="several objectives"):
                mo.tell(t, 1.0)  # a bare value: which objective?
        mo.tell(t, loss=loss_of(t.params), ms=float(t.params["layers"]) * 3)
        n += 1
    mo.close()
    assert n == 24
    front = cl.redis.hgetall("cgq:job:{%d}:pareto" % mo.id)
    assert front and all(set(json.loads(v)) == {"loss", "ms"} for v in front.values())
    by = c.study(name="by", space=SPACE, objective={"metric": "loss", "mode": "min"},
                 search={"algorithm": "bayes", "seed": 8, "samples": 15, "initial": 5})
    while (t := by.ask(wait=20)) is not None:
        by.tell(t, loss_of(t.params))  # the single objective, positionally
    by.close()
    h = job_hash(cl, by.id)
    assert h["state"] == "finished" and h["succeeded"] == "15", h


def test_example_script(installed):
    """orchestration/examples/python/ask_tell.py, as the docs tell users to run it."""
    script = os.path.join(REPO, "orchestration", "examples", "python", "ask_tell.py")
    r = subprocess.run([installed.python, script], capture_output=True, text=True,
                       timeout=120 * harness.SPEED,
                       env=dict(os.environ, CGQ_BIN_DIR=harness.BIN_DIR))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ask and tell: 30 trials" in r.stdout, r.stdout
    assert "submitted job 2: finished" in r.stdout, r.stdout


def test_use_after_close(cl):
    c = client_of(cl)
    study = c.study(name="closed", space=SPACE, objective={"metric": "loss", "mode": "min"},
                    search={"algorithm": "random", "seed": 9, "samples": 2})
    t = study.ask(wait=20)
    study.close()
    assert t.should_stop()
    with pytest.raises(StudyError, match="closed"):
        t.report(epoch=1, loss=1.0)
    with pytest.raises(StudyError, match="closed"):
        study.tell(t, loss=1.0)
    # The trial went back to the queue: the study, asked again, gets it again.
    t2 = study.ask(wait=20)
    assert (t2.id, t2.attempt) == (t.id, t.attempt + 1)
    study.tell(t2, loss=0.5)
    study.close()


def test_prefetch(cl):
    """prefetch=N holds N trials ready: an ask returns at once, and at the
    end nothing is left held or counted twice."""
    c = client_of(cl)
    study = c.study(name="pf", space=SPACE, objective={"metric": "loss", "mode": "min"},
                    search={"algorithm": "random", "seed": 10, "samples": 40}, prefetch=4)
    t = study.ask(wait=20)
    # The ask asked for itself and four more: they are assigned, not yet asked.
    wait_for(lambda: job_hash(cl, study.id).get("running") == "5", what="4 trials held ready")
    study.tell(t, loss=loss_of(t.params))
    seen = {t.id}
    while (t := study.ask(wait=20)) is not None:
        assert t.id not in seen
        seen.add(t.id)
        study.tell(t, loss=loss_of(t.params))
    study.close()
    assert seen == set(range(40))
    h = job_hash(cl, study.id)
    assert h["state"] == "finished" and h["succeeded"] == "40", h
    assert all(trial_hash(cl, study.id, i)["attempt"] == "1" for i in range(40))


def test_constraints(cl):
    """constraints= as the spec's: the best told trial is the best feasible one."""
    c = client_of(cl)
    study = c.study(name="cons", space={"x": {"uniform": [0, 1]}},
                    objective={"metric": "score", "mode": "max"}, constraints=["score <= 0.5"],
                    search={"algorithm": "random", "seed": 11, "samples": 20})
    told = {}
    while (t := study.ask(wait=20)) is not None:
        study.tell(t, score=t.params["x"])
        told[t.id] = t.params["x"]
    study.close()
    h = job_hash(cl, study.id)
    feasible = {i: v for i, v in told.items() if v <= 0.5}
    assert feasible and len(feasible) < len(told)
    best = max(feasible, key=feasible.get)
    assert h["best_trial"] == str(best), (h["best_trial"], best)
    for i, v in told.items():
        assert trial_hash(cl, study.id, i)["feasible"] == ("1" if v <= 0.5 else "0")
    # The client reads feasibility back, in Trials and in the frame.
    trials = {t.id: t for t in study.job.trials()}
    assert all(trials[i].feasible == (v <= 0.5) for i, v in told.items())
    assert all((trials[i].violation is None) == (v <= 0.5) for i, v in told.items())
    df = study.job.to_pandas()
    assert list(df.sort_values("id")["feasible"]) == [told[i] <= 0.5 for i in sorted(told)]
