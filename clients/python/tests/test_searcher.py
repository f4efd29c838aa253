"""Your own searcher (cgq/searcher.py, cgq/optuna_search.py, `cgq optuna-search`)
against real processes: a redis-server, a cgq-coordinator and a cgq-worker
(tests/integration/harness.py), with jobs whose spec says search:
{algorithm: external}.

What a researcher relies on: the job runs exactly the points the searcher
sent, each once, in order; bad points are refused whole with the param and
what it allows; a searcher process killed -9 is replaced by another that
replays every observation and the job still runs each trial once; a
coordinator killed -9 with suggestions queued loses none and uses none
twice; and Optuna's TPE drives a job to its end through the CLI.
"""

import json
import os
import signal
import subprocess
import sys
import time
import types

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import harness  # noqa: E402

redis = pytest.importorskip("redis")
pytest.importorskip("zmq")
pytest.importorskip("google.protobuf")
pytest.importorskip("yaml")


@pytest.fixture(scope="module")
def pkg(installed):
    """The site-packages of the venv the package is installed in
    (conftest.py): PYTHONPATH for the searcher processes the tests start."""
    return installed.site


@pytest.fixture
def cl(tmp_path):
    c = harness.Cluster(str(tmp_path))
    c.start_redis(appendonly=True)
    c.start_coordinator(extra=["--durable-after", "0"])
    yield c
    problems = c.stop()
    assert not problems, problems


def client_of(c):
    """What serve_searcher needs of a cgq.Client."""
    return types.SimpleNamespace(redis=redis.Redis.from_url(c.redis_url),
                                 coordinator=c.control_ep, curve_secret=None, curve_server=None)


def wait_for(pred, timeout=20.0, what="condition"):
    end = time.monotonic() + timeout * harness.SPEED
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out waiting for " + what)


def external_spec(c, name, samples, trial="  kind: noop\n", extra=""):
    return c.write_file(name + ".yaml", (
        "name: %s\nspace:\n  x: {uniform: [0, 1]}\n  n: {randint: [1, 8]}\n  gnn: GAT\n"
        "search: {algorithm: external, samples: %d%s}\n"
        "objective: {metric: score, mode: max}\ntrial:\n%s" % (name, samples, extra, trial)))


def suggestions(c, job):
    return [json.loads(s) for s in c.redis.cmd("LRANGE", "cgq:job:{%d}:suggestions" % job, 0, -1)]


def assert_ran_each_once(c, job, samples):
    """The job finished with trials 0..samples-1, trial i running suggestion
    i, each succeeded once (one trial.succeeded event per id)."""
    h = c.wait_job(job, timeout=120)
    assert h["state"] == "finished", h
    assert int(h["succeeded"]) == samples, h
    trials = c.trials(job)
    assert sorted(trials) == list(range(samples))
    sent = suggestions(c, job)
    assert len(sent) == samples, "%d suggestions recorded for %d trials" % (len(sent), samples)
    for t, th in trials.items():
        assert json.loads(th["params"]) == sent[t], (t, th["params"], sent[t])
        assert th["state"] == "succeeded", (t, th)
    ok = [int(e["trial"]) for e in c.events(job) if e["type"] == "trial.succeeded"]
    assert sorted(ok) == list(range(samples)), "trial.succeeded events: %s" % sorted(ok)


# A searcher process for the kill tests: a deterministic suggest (slowed
# down, so that the test can kill it mid-job) and an observe that appends
# each observation to a file, flushed at once.
SEARCHER = r'''
import json, os, random, sys, time, types
sys.path.insert(0, sys.argv[1])
import redis
from cgq.searcher import serve_searcher
job, out, ahead, delay = int(sys.argv[4]), sys.argv[5], int(sys.argv[6]), float(sys.argv[7])
client = types.SimpleNamespace(redis=redis.Redis.from_url(sys.argv[2]), coordinator=sys.argv[3])
f = open(out, "a")
f.write(json.dumps({"start": os.getpid()}) + "\n")
f.flush()

def suggest(space, pending, trial):
    time.sleep(delay)
    r = random.Random(trial)
    return {"x": round(r.random(), 6), "n": r.randint(1, 8)}

def observe(t):
    f.write(json.dumps({"id": t["id"], "state": t["state"], "value": t["value"]}) + "\n")
    f.flush()

state = serve_searcher(client, job, suggest, observe, ahead=ahead, poll=0.2, request_timeout=2)
f.write(json.dumps({"end": state}) + "\n")
f.close()
'''


def start_searcher(c, pkg, job, out, ahead=2, delay=0.0):
    path = c.write_file("searcher.py", SEARCHER)
    log = open(os.path.join(c.logdir, "searcher-%d.log" % time.monotonic_ns()), "ab")
    return subprocess.Popen([sys.executable, path, pkg, c.redis_url, c.control_ep, str(job),
                             out, str(ahead), str(delay)], stdin=subprocess.DEVNULL,
                            stdout=log, stderr=log)


def runs_of(out):
    """The observation file as runs: [{"pid", "ids": [...], "end"}]."""
    runs = []
    for line in open(out):
        d = json.loads(line)
        if "start" in d:
            runs.append({"pid": d["start"], "ids": [], "end": None})
        elif "end" in d:
            runs[-1]["end"] = d["end"]
        else:
            runs[-1]["ids"].append(d["id"])
    return runs


def test_python_searcher_runs_a_job(cl, pkg):
    from cgq.searcher import serve_searcher
    cl.start_worker("w1", cpus=2)
    job = cl.submit(external_spec(cl, "ext", 30))
    seen, asked = [], []

    def suggest(space, pending, trial):
        assert set(space) == {"x", "n", "gnn"}
        assert trial == len(asked) and trial not in pending
        asked.append(trial)
        return {"x": (trial % 10) / 10.0, "n": 1 + trial % 8}

    t0 = time.monotonic()
    state = serve_searcher(client_of(cl), job, suggest, seen.append, ahead=3, poll=0.2)
    assert state == "finished"
    assert time.monotonic() - t0 < 60
    assert [t["id"] for t in sorted(seen, key=lambda t: t["id"])] == list(range(30))
    assert len(seen) == 30, "observe() called %d times for 30 trials" % len(seen)
    for t in seen:
        assert t["state"] == "succeeded"
        # noop reports the numeric params as metrics, their sum as score
        assert t["params"] == {"x": (t["id"] % 10) / 10.0, "n": 1 + t["id"] % 8, "gnn": "GAT"}
        assert abs(t["value"] - (t["params"]["x"] + t["params"]["n"])) < 1e-9
    assert asked == list(range(30))
    assert_ran_each_once(cl, job, 30)


def test_bad_suggestions_are_refused_whole(cl, pkg):
    from cgq.searcher import SuggestError, send_suggestions, serve_searcher, SearcherError
    job = cl.submit(external_spec(cl, "ext", 5))
    client = client_of(cl)
    with pytest.raises(SuggestError) as e:
        send_suggestions(client, job, [{"x": 0.5, "n": 2}, {"x": 2, "n": 2}])
    assert e.value.code == 2
    msg = str(e.value)
    assert "suggestion 2 of 2: param x = 2" in msg and "allowed: uniform [0, 1]" in msg, msg
    assert "nothing was queued" in msg
    with pytest.raises(SuggestError, match=r"'lr' is not a param of the space \(its params: "
                                           r"x, n\)"):
        send_suggestions(client, job, [{"x": 0.5, "n": 2, "lr": 0.1}])
    with pytest.raises(SuggestError, match=r"param n is not set \(allowed: randint \[1, 8\]"):
        send_suggestions(client, job, [{"x": 0.5}])
    with pytest.raises(SuggestError, match=r"param gnn = \"GCN\" sets a constant"):
        send_suggestions(client, job, [{"x": 0.5, "n": 2, "gnn": "GCN"}])
    with pytest.raises(SuggestError, match=r"takes 5 more suggestion\(s\), not 6"):
        send_suggestions(client, job, [{"x": 0.5, "n": 2}] * 6)
    assert cl.redis.cmd("LLEN", "cgq:job:{%d}:suggestions" % job) == 0
    assert cl.job(job)["suggested"] == "0"
    # A job that searches on its own takes none.
    other = cl.submit(cl.write_file("rnd.yaml", "name: rnd\nspace: {x: {uniform: [0, 1]}}\n"
                                    "search: {samples: 2}\ntrial: {kind: noop}\n"))
    with pytest.raises(SuggestError, match="algorithm random, not external"):
        send_suggestions(client, other, [{"x": 0.5}])
    with pytest.raises(SearcherError, match="not external"):
        serve_searcher(client, other, lambda *a: None)
    # A good one is answered once recorded.
    assert send_suggestions(client, job, [{"x": 0.5, "n": 2}]) == "queued 1 (1 waiting)"
    assert suggestions(cl, job) == [{"x": 0.5, "n": 2, "gnn": "GAT"}]
    # serve_searcher raises what the coordinator says of a bad suggestion.
    with pytest.raises(SuggestError, match="param x = 7"):
        serve_searcher(client, job, lambda s, p, t: {"x": 7, "n": 1}, poll=0.2)
    assert len(suggestions(cl, job)) == 1


def test_searcher_killed_and_replaced(cl, pkg):
    cl.start_worker("w1", cpus=2)
    samples = 40
    job = cl.submit(external_spec(cl, "ext", samples, extra=", concurrency: 2"))
    out = os.path.join(cl.tmp, "observed.jsonl")
    p = start_searcher(cl, pkg, job, out, ahead=2, delay=0.05)
    try:
        wait_for(lambda: os.path.exists(out) and len(runs_of(out)[0]["ids"]) >= 10, 30,
                 "the first searcher to observe 10 trials")
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        first = runs_of(out)[0]
        assert first["end"] is None
        finished = {t for t, h in cl.trials(job).items()
                    if h.get("state") in ("succeeded", "failed", "stopped", "cancelled")}
        assert len(finished) < samples, "the job ended before the searcher was killed"
        p = start_searcher(cl, pkg, job, out, ahead=2, delay=0.0)
        assert p.wait(60) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    runs = runs_of(out)
    assert len(runs) == 2 and runs[1]["end"] == "finished", runs
    second = runs[1]["ids"]
    assert len(second) == len(set(second)), "the new searcher observed a trial twice"
    assert sorted(second) == list(range(samples))
    assert finished <= set(second[:len(finished)]), \
        "the replay did not come first, or missed a trial finished before the kill"
    assert len(first["ids"]) == len(set(first["ids"]))
    assert_ran_each_once(cl, job, samples)


COMMAND_TRIAL = r'''
import json, os, sys, time
with open(sys.argv[1], "a") as f:
    f.write("%s %s\n" % (os.environ["CGQ_TRIAL_ID"], os.environ["CGQ_ATTEMPT"]))
time.sleep(float(sys.argv[2]))
p = json.loads(os.environ["CGQ_PARAMS"])
os.write(3, (json.dumps({"score": p["x"] + p["n"]}) + "\n").encode())
'''


def test_coordinator_killed_with_suggestions_queued(cl, pkg):
    cl.write_file("trial.py", COMMAND_TRIAL)
    cl.start_worker("w1", cpus=2)
    samples = 16
    trial = ("  command: python3 {spec_dir}/trial.py {spec_dir}/runs.txt 0.3\n"
             "  resources: {cpu: 1}\n")
    job = cl.submit(external_spec(cl, "ext", samples, trial=trial))
    out = os.path.join(cl.tmp, "observed.jsonl")
    p = start_searcher(cl, pkg, job, out, ahead=4)
    try:
        def queued():
            h = cl.job(job)
            n = cl.redis.cmd("LLEN", "cgq:job:{%d}:suggestions" % job)
            done = int(h.get("succeeded") or 0)
            return done >= 3 and n - int(h.get("suggested") or 0) >= 2 and (n, h)
        n, h = wait_for(queued, 30, "3 trials done and 2 suggestions queued")
        cl.coordinator.kill9()
        waiting = n - int(cl.job(job)["suggested"])
        assert waiting >= 2
        nodes, control = harness.endpoint_port(cl.nodes_ep), harness.endpoint_port(cl.control_ep)
        cl.start_coordinator(extra=["--durable-after", "0",
                                    "--bind", "tcp://127.0.0.1:%d" % nodes,
                                    "--control", "tcp://127.0.0.1:%d" % control])
        assert p.wait(90) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
    assert "suggestion(s) waiting" in harness.read_text(cl.coordinator.err_path)
    runs = runs_of(out)
    assert len(runs) == 1 and runs[0]["end"] == "finished", runs
    assert sorted(runs[0]["ids"]) == list(range(samples))
    assert len(runs[0]["ids"]) == samples, "a trial observed twice"
    assert_ran_each_once(cl, job, samples)
    started = cl.counted_runs()
    assert sorted({t for t, _a in started}) == list(range(samples))
    # A trial runs again only when its attempt was lost with the coordinator:
    # no attempt starts twice, and no trial more than twice. (An attempt whose
    # Assign was still in the killed coordinator never starts: the restarted
    # one requeues it as the next attempt, so a number can be skipped.)
    for t in range(samples):
        attempts = sorted(a for tt, a in started if tt == t)
        assert len(attempts) == len(set(attempts)) and 1 <= len(attempts) <= 2, (t, attempts)


def test_cgq_optuna_search_tpe(cl, pkg):
    pytest.importorskip("optuna")
    cl.start_worker("w1", cpus=2)
    samples = 12
    spec = cl.write_file("tpe.yaml", (
        "name: tpe\nspace:\n  x: {uniform: [0, 1]}\n  lr: {loguniform: [1.0e-4, 1.0e-1]}\n"
        "  n: {randint: [1, 8]}\n  w: {quniform: [0, 100, 5]}\n  h: {choice: [64, 128]}\n"
        "  d: {repeat: 2, of: {choice: [2, 3]}}\n"
        "  ops: {assignment: {items: [conv, pool], choices: [cpu, gpu]}}\n  gnn: GAT\n"
        "search: {algorithm: external, samples: %d}\n"
        "objective: {metric: score, mode: min}\ntrial: {kind: noop}\n" % samples))
    job = cl.submit(spec)
    env = cl.cli_env(CGQ_PYTHON=sys.executable, PYTHONPATH=pkg)
    r = cl.cgq("optuna-search", job, "--sampler", "TPESampler", "--seed", "3",
               "--sampler-args", '{"n_startup_trials": 4}', timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "job %d finished; %d trial(s) observed" % (job, samples) in r.stderr, r.stderr
    assert_ran_each_once(cl, job, samples)
    for t in cl.trials(job).values():
        p = json.loads(t["params"])
        assert 0 <= p["x"] <= 1 and 1e-4 <= p["lr"] <= 0.1 and p["w"] % 5 == 0
        assert p["ops"]["id"] in range(4) and set(p["ops"]["map"]) == {"conv", "pool"}
    # Run again on the finished job: it replays and ends at once.
    r = cl.cgq("optuna-search", job, "--sampler", "RandomSampler", timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    assert "replayed %d finished trial(s)" % samples in r.stderr
    # A package Python cannot import: one line that says how to install it.
    bare = cl.cli_env(CGQ_PYTHON=sys.executable, PYTHONPATH=None)
    r = cl.cgq("optuna-search", job, env=bare, cwd=cl.tmp)
    assert r.returncode == 2
    assert "pip install ./clients/python" in r.stderr and "CGQ_PYTHON" in r.stderr, r.stderr


def test_optuna_nsga2_multi_objective(cl, pkg):
    pytest.importorskip("optuna")
    from cgq.optuna_search import main
    cl.start_worker("w1", cpus=2)
    samples = 10
    job = cl.submit(cl.write_file("mo.yaml", (
        "name: mo\nspace:\n  x: {uniform: [0, 1]}\n  n: {randint: [1, 8]}\n"
        "search: {algorithm: external, samples: %d}\n"
        "objectives: [{metric: x, mode: min}, {metric: n, mode: max}]\n"
        "trial: {kind: noop}\n" % samples)))
    rc = main([str(job), "--sampler", "NSGAIISampler", "--seed", "1",
               "--sampler-args", '{"population_size": 4}', "--redis", cl.redis_url,
               "--coordinator", cl.control_ep, "--quiet"])
    assert rc == 0
    assert_ran_each_once(cl, job, samples)
    # An objective Optuna cannot read from the metrics is refused up front.
    bad = cl.submit(cl.write_file("expr.yaml", (
        "name: expr\nspace:\n  x: {uniform: [0, 1]}\n"
        "search: {algorithm: external, samples: 2}\n"
        "objectives: [{expr: \"x*2\", mode: min}, {metric: x, mode: max}]\n"
        "trial: {kind: noop}\n")))
    assert main([str(bad), "--redis", cl.redis_url, "--coordinator", cl.control_ep]) == 2
