"""search.warm_start from the Python client (cgq/_warm.py) against real
processes (conftest.py): Client.submit resolves it as `cgq submit` does.

- For tpe, cmaes and evolution, a spec file and a dict naming a finished
  job and a points file: the job the client submits holds the same rows in
  cgq:job:{J}:warm as the job the CLI submits from the same spec (the same
  trials, in order, the same "from").
- A source job whose trials partly lie outside this space (x1 up to 20 for
  a space to 10): the trials the coordinator refuses are left out, as the
  CLI leaves them out, and the rows are again the CLI's; for cmaes, a job
  that searched x1 alone gives no rows (each trial lacks x2), with a note.
- Bad cases raise cgq.SpecError and create nothing: a job that does not
  exist, a job of another space, a points line that is not a point
  (FILE:LINE, .line set), a line that is not JSON (NaN too), a value
  outside the space (the coordinator's check, reported at FILE:LINE), a
  file that cannot be read.
"""

import json
import os

import pytest

import cgq

SCRIPT = r'''
import json, os, sys
p = json.loads(os.environ["CGQ_PARAMS"])
x1, x2 = p.get("x1", 0.0), p.get("x2", 0.0)
os.write(3, (json.dumps({"f": (x1 - 2) ** 2 + (x2 - 7) ** 2}) + "\n").encode())
'''

SPEC = '''name: %s
space: %s
search: %s
objective: {metric: f, mode: min}
trial:
  command: python3 {spec_dir}/trial.py
  resources: {cpu: 1}
'''

SPACE = "{x1: {uniform: [-5, 10]}, x2: {uniform: [0, 15]}}"
WIDE = "{x1: {uniform: [-5, 20]}, x2: {uniform: [0, 15]}}"

POINTS = ['# seen elsewhere',
          '{"params": {"x1": 1.5, "x2": 6.5}, "metrics": {"f": 0.5}}',
          '',
          '{"params": {"x1": 3.0, "x2": 8.0, "other": 1}, "metrics": {"f": 2.0}}',
          '{"params": {"x1": -4.0, "x2": 1.0}, "metrics": {"f": 72.0}}']


def _source(cluster, name, space, samples=12):
    cluster.write_file("trial.py", SCRIPT)
    path = cluster.write_file(name + ".yaml", SPEC % (name, space, "{algorithm: random, samples: "
                                                      "%d, seed: 2}" % samples))
    j = cluster.harness.submit(path)
    assert cluster.harness.wait_job(j, 60).get("state") == "finished"
    return j


def _rows(cluster, j):
    text = cluster.redis.cmd("GET", "cgq:job:{%d}:warm" % j)
    assert text, "job %d has no warm rows" % j
    return json.loads(text)


def _cli_job(cluster, path):
    return cluster.harness.submit(path)


def test_same_rows_as_the_cli(cluster, client):
    a = _source(cluster, "seen", SPACE)
    cluster.write_file("seen.jsonl", "\n".join(POINTS) + "\n")
    for alg in ("tpe", "cmaes", "evolution"):
        _same_rows(cluster, client, a, alg)


CSV = ['# x1, x2 are params of the space; f and note are metrics',
       'x1,x2,f,note',
       '1.5,6.5,0.5,"first, best"',
       '',
       '3,8,2.0,',
       '-4.0,1,72,"say ""hi"""']


def test_csv_points_as_the_cli(cluster, client):
    cluster.write_file("trial.py", SCRIPT)
    cluster.write_file("seen.csv", "\r\n".join(CSV) + "\r\n")
    path = cluster.write_file("csv.yaml", SPEC % ("csv", SPACE, "{algorithm: tpe, samples: 1, "
                                                  "warm_start: {points: seen.csv}}"))
    c = _cli_job(cluster, path)
    p = client.submit(path)
    want = _rows(cluster, c)
    f = os.path.join(cluster.specdir, "seen.csv")
    assert want == [
        {"params": {"x1": 1.5, "x2": 6.5}, "metrics": {"f": 0.5, "note": "first, best"},
         "from": f + ":3"},
        {"params": {"x1": 3, "x2": 8}, "metrics": {"f": 2.0}, "from": f + ":5"},
        {"params": {"x1": -4.0, "x2": 1}, "metrics": {"f": 72, "note": 'say "hi"'},
         "from": f + ":6"}], want
    assert _rows(cluster, p.id) == want


def _same_rows(cluster, client, a, alg):
    search = ("{algorithm: %s, samples: 2, seed: 3, concurrency: 1, warm_start: {jobs: [%d], "
              "points: seen.jsonl}}" % (alg, a))
    path = cluster.write_file("warm%s.yaml" % alg, SPEC % ("warm", SPACE, search))
    c = _cli_job(cluster, path)
    p = client.submit(path)
    assert p.id != c
    want = _rows(cluster, c)
    # 12 trials of job a and the file's 3 points
    assert len(want) == 15, want
    # in trial order, then the file's lines
    assert [r["from"] for r in want[:12]] == ["job %d trial %d" % (a, i) for i in range(12)]
    assert [r["from"] for r in want[12:]] == [os.path.join(cluster.specdir, "seen.jsonl") + ":%d"
                                              % i for i in (2, 4, 5)]
    assert _rows(cluster, p.id) == want
    # A dict whose spec_dir is the same directory: the same rows again.
    d = {"name": "warmdict", "space": {"x1": {"uniform": [-5, 10]}, "x2": {"uniform": [0, 15]}},
         "search": {"algorithm": alg, "samples": 2, "seed": 3, "concurrency": 1,
                    "warm_start": {"jobs": [a], "points": "seen.jsonl"}},
         "objective": {"metric": "f", "mode": "min"},
         "trial": {"command": "python3 {spec_dir}/trial.py", "resources": {"cpu": 1}}}
    q = client.submit(d, spec_dir=cluster.specdir)
    assert _rows(cluster, q.id) == want
    for j in (c, p.id, q.id):
        assert cluster.harness.wait_job(j, 60).get("state") == "finished"
    assert p.wait(progress=False, timeout=30) == "finished"
    assert len(p.trials()) == 2  # the warm points are not run again


def test_trials_outside_the_space_left_out_as_the_cli(cluster, client, capfd):
    a = _source(cluster, "wide", WIDE, samples=16)
    xs = [t.params["x1"] for t in client.job(a).trials()]
    outside = sum(1 for x in xs if x > 10)
    assert 0 < outside < 16, xs
    search = ("{algorithm: tpe, samples: 1, seed: 3, warm_start: {jobs: [%d]}}" % a)
    path = cluster.write_file("narrow.yaml", SPEC % ("narrow", SPACE, search))
    c = _cli_job(cluster, path)
    capfd.readouterr()
    p = client.submit(path)
    err = capfd.readouterr().err
    want = _rows(cluster, c)
    assert len(want) == 16 - outside
    assert _rows(cluster, p.id) == want
    assert "job %d: %d succeeded trial(s) left out" % (a, outside) in err, err
    # cmaes needs every param: a job that searched x1 alone gives nothing, with a note.
    b = _source(cluster, "half", "{x1: {uniform: [-5, 10]}}", samples=3)
    search = "{algorithm: cmaes, samples: 1, seed: 3, warm_start: {jobs: [%d]}}" % b
    path = cluster.write_file("whole.yaml", SPEC % ("whole", SPACE, search))
    c = _cli_job(cluster, path)
    capfd.readouterr()
    p = client.submit(path)
    err = capfd.readouterr().err
    assert _rows(cluster, c) == [] and _rows(cluster, p.id) == []
    assert "job %d: 3 succeeded trial(s) left out" % b in err, err


def test_bad_warm_starts_raise_spec_error(cluster, client):
    a = _source(cluster, "seen", SPACE, samples=3)
    other = _source(cluster, "other", "{z: {uniform: [0, 1]}}", samples=2)
    before = cluster.jobs_in_redis()

    def spec(name, warm):
        return cluster.write_file(name + ".yaml", SPEC % (
            name, SPACE, "{algorithm: tpe, samples: 2, warm_start: %s}" % warm))

    with pytest.raises(cgq.SpecError, match="search.warm_start.jobs: job 99 does not exist") as e:
        client.submit(spec("nojob", "{jobs: [%d, 99]}" % a))
    assert e.value.path.endswith("nojob.yaml")
    with pytest.raises(cgq.SpecError, match="job %d searched another space: no param in common"
                       % other):
        client.submit(spec("otherspace", "{jobs: [%d]}" % other))

    def bad_file(name, lines, line, match):
        f = cluster.write_file(name, "\n".join(lines) + "\n")
        with pytest.raises(cgq.SpecError) as e:
            client.submit(spec(name.split(".")[0], "{points: %s}" % name))
        assert e.value.path == f and e.value.line == line, (str(e.value), e.value.line)
        assert str(e.value).startswith("%s:%d: " % (f, line)), str(e.value)
        assert match in str(e.value), str(e.value)
        return e.value

    bad_file("bad.jsonl", POINTS[:4] + ['{"params": {"x1": 1}}'], 5,
             'a point needs "params" and "metrics"')
    err = bad_file("notjson.jsonl", ["{nope"], 1, "not JSON")
    assert "{nope" in str(err).splitlines()[1]  # the offending line, shown
    bad_file("nan.jsonl", POINTS[:2] + ['{"params": {"x1": NaN, "x2": 1}, "metrics": {"f": 1}}'],
             3, "not JSON")
    # The coordinator's domain check, reported at the file's line.
    bad_file("out.jsonl", [POINTS[1], '{"params": {"x1": 50, "x2": 1}, "metrics": {"f": 1}}'], 2,
             "x1")
    bad_file("noobj.jsonl", [POINTS[1], '{"params": {"x1": 5, "x2": 1}, "metrics": {"g": 1}}'], 2,
             "objective")
    # CSV: the same errors from the CLI and from Python.
    for name, lines, line, match in (
            ("short.csv", ["x1,x2,f", "1,2,3", "1,2"], 3, "2 fields where the header has 3"),
            ("twice.csv", ["x1,x2,x1,f", "1,2,3,4"], 1, "column 3 is a name given twice"),
            ("quote.csv", ["x1,x2,f", '1,"2,3'], 2, "quote"),
            ("domain.csv", ["x1,x2,f", "1,2,3", "50,2,3"], 3, "x1")):
        bad_file(name, lines, line, match)
        r = cluster.cgq("submit", os.path.join(cluster.specdir, name.split(".")[0] + ".yaml"))
        assert r.returncode == 2, r.stdout + r.stderr
        assert "%s:%d: " % (name, line) in r.stderr and match in r.stderr, r.stderr
    with pytest.raises(cgq.SpecError, match="search.warm_start.points: cannot read .*missing"):
        client.submit(spec("nofile", "{points: missing.jsonl}"))
    assert cluster.jobs_in_redis() == before
