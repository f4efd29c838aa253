"""study: ask-and-tell on a cgq job whose trials run in your own process.

    study = client.study(name="cg", space={"lr": {"loguniform": [1e-4, 1e-1]}},
                         objective={"metric": "loss", "mode": "min"},
                         search={"algorithm": "bayes", "seed": 1})
    t = study.ask()                     # the job's searcher chooses t.params
    for epoch in range(10):
        t.report(epoch=epoch, loss=...)
        if t.should_stop():             # the job's early stopper decides
            break
    study.tell(t, loss=final)           # or study.tell(t, state="failed", error="...")

A study is a job with `trial: {kind: client}` (docs/python.md). This process
attaches to it as a client node (cgq/_node.py): its trials appear in `cgq
status`, `cgq results` and `cgq watch` like any other; a trial asked and not
told in time (ask(timeout=...), else the spec's trial.timeout), or held by a
process that dies, goes back to the queue as a node's lost trial does; a
result is recorded exactly once.
"""

import json
import math
import os
import random
import re
import socket
import threading

from . import keyspace
from ._node import ClientNode, NodeError

DEFAULT_SAMPLES = 1000000
# Ray Tune's names of the ASHA settings, as early_stop= may be written.
RAY_NAMES = {"time_attr": "attribute", "max_t": "max", "grace_period": "grace",
             "reduction_factor": "reduction"}  # a study runs until you stop asking (or cancel it)
MAX_METRICS_BYTES = 1 << 20

__all__ = ["Study", "StudyTrial", "StudyError", "open_study"]


class StudyError(Exception):
    """A tell or report the study cannot take: the message says why and what to do."""


def _s(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _check_value(path, v, depth=0):
    if depth > 32:
        raise StudyError("%s is nested more than 32 levels deep" % path)
    if isinstance(v, bool) or v is None or isinstance(v, int):
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            raise StudyError("%s is %r: metrics must be finite numbers (tell(t, state='failed', "
                             "error='diverged') for a run that diverged)" % (path, v))
        return v
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise StudyError("%s is not valid UTF-8 text (it holds a lone surrogate, e.g. from "
                             "bytes decoded with surrogateescape)" % path) from None
        return v
    if isinstance(v, (bytes, bytearray)):
        raise StudyError("%s is bytes: give a number or text (decode it first)" % path)
    if isinstance(v, (list, tuple)):
        return [_check_value("%s[%d]" % (path, i), x, depth + 1) for i, x in enumerate(v)]
    if isinstance(v, dict):
        return {_check_key(path, k): _check_value("%s.%s" % (path, k), x, depth + 1)
                for k, x in v.items()}
    # numpy scalars and arrays
    if hasattr(v, "tolist"):
        return _check_value(path, v.tolist(), depth)
    if hasattr(v, "__float__"):
        return _check_value(path, float(v), depth)
    raise StudyError("%s is a %s, which is not a number, text, list or mapping"
                     % (path, type(v).__name__))


def _check_key(path, k):
    if not isinstance(k, str) or not k:
        raise StudyError("%s has a key %r: keys must be non-empty text" % (path, k))
    try:
        k.encode("utf-8")
    except UnicodeEncodeError:
        raise StudyError("%s has a key that is not valid UTF-8 text" % path) from None
    return k


def metrics_json(what, metrics):
    """The JSON object of a tell's or a report's metrics, checked: finite
    numbers, UTF-8 text, at most 1 MiB. Raises StudyError naming the metric."""
    clean = {_check_key(what, k): _check_value("%s '%s'" % (what, k), v)
             for k, v in metrics.items()}
    text = json.dumps(clean, separators=(",", ":"), allow_nan=False)
    if len(text) > MAX_METRICS_BYTES:
        raise StudyError("%s are %d bytes of JSON, more than %d: keep large data in files and "
                         "report their paths" % (what, len(text), MAX_METRICS_BYTES))
    return text


class StudyTrial:
    """A trial this process asked for: id, attempt, params. report() sends a
    progress report; should_stop() says whether the job's early stopper (or a
    cancel) has stopped it."""

    def __init__(self, study, task):
        self._study = study
        self._task = task
        self._node = study._node
        self.id = task.trial
        self.job = task.job
        self.attempt = task.attempt
        self.params = task.params
        self.reports = 0
        self.told = None

    def report(self, metrics=None, **kw):
        m = dict(metrics or {}, **kw)
        if self.told:
            raise StudyError("trial %d was already told (%s): report before tell"
                             % (self.id, self.told))
        text = metrics_json("trial %d's report" % self.id, m)
        node = self._study._node
        if node is None:
            raise StudyError("the study is closed: trial %d went back to the queue" % self.id)
        try:
            node.report(self._task, text)
        except NodeError as e:
            raise StudyError(str(e)) from None
        self.reports += 1

    def should_stop(self):
        """True once the job's early stopper (or a cancel) has stopped this
        trial, or the study was closed under it."""
        node = self._study._node
        return node is None or node.should_stop(self._task)

    @property
    def stop_reason(self):
        return self._task.stopped

    def __repr__(self):
        return "StudyTrial(job=%d, id=%d, attempt=%d, params=%r)" % (
            self.job, self.id, self.attempt, self.params)


def _job_is_client(spec_text):
    if not spec_text:
        return False
    try:
        spec = json.loads(spec_text)
        return isinstance(spec, dict) and isinstance(spec.get("trial"), dict) \
            and spec["trial"].get("kind") == "client"
    except ValueError:
        return re.search(r"\bkind:\s*['\"]?client\b", spec_text) is not None


def find_study(client, name):
    """The id of the newest running job called `name` whose trials are kind
    client, or None."""
    r = client.redis
    ids = [int(_s(x)) for x in r.zrevrange(keyspace.JOBS, 0, -1)]
    pipe = r.pipeline(transaction=False)
    for j in ids:
        pipe.hmget(keyspace.job(j), "name", "state", "spec")
    for j, (n, state, spec) in zip(ids, pipe.execute()):
        if _s(n) == name and _s(state) == "running" and _job_is_client(_s(spec)):
            return j
    return None


def _node_endpoints(client, nodes):
    if nodes:
        return nodes
    env = os.environ.get("CGQ_COORDINATOR_NODES")
    if env:
        return env
    # The coordinator's own record: the port of its node socket, on the
    # host the control endpoint names.
    bound = _s(client.redis.hget(keyspace.COORDINATOR, "nodes")) or ""
    ctl = getattr(client, "coordinator", "") or "tcp://127.0.0.1:7701"
    m = re.match(r"^(tcp://)(\[[^\]]+\]|[^:]+):(\d+)$", ctl)
    p = re.match(r"^tcp://.*:(\d+)$", bound)
    if m and p:
        return "%s%s:%s" % (m.group(1), m.group(2), p.group(1))
    return "tcp://127.0.0.1:7700"


def _curve(client):
    """(public, secret, server) of the client's CURVE keys, or None; and the
    key's name (alice for alice.key_secret: the client node's id starts with
    it, as `cgq keygen alice --nodes 'alice-*'` admits)."""
    from .control import load_curve
    sec = getattr(client, "curve_secret", None)
    keys = load_curve(sec and os.path.expanduser(sec),
                      getattr(client, "curve_server", None) and
                      os.path.expanduser(client.curve_server))
    if keys is None:
        return None, None
    name = os.path.basename(sec)
    for suffix in (".key_secret", ".key"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return keys, name


class Study:
    """Ask-and-tell on job `job_id` (see the module's docstring)."""

    def __init__(self, client, job_id, node_id=None, nodes=None, prefetch=0):
        self.client = client
        self.id = int(job_id)
        self._nodes = nodes
        self._prefetch = prefetch
        self._node_id = node_id
        self._node = None
        self._lock = threading.Lock()
        self._told = {}      # trial id -> state, of this process's tells
        self._metric = None

    @property
    def job(self):
        return self.client.job(self.id)

    def _attach(self):
        with self._lock:
            if self._node is None:
                curve, keyname = _curve(self.client)
                node_id = self._node_id or os.environ.get("CGQ_CLIENT_ID")
                if not node_id:
                    host = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname())[:64]
                    node_id = "%s-%s-%d-%04x" % (keyname or "study", host, os.getpid(),
                                                  random.getrandbits(16))
                self._node = ClientNode(_node_endpoints(self.client, self._nodes), node_id,
                                        self.id, curve=curve, prefetch=self._prefetch)
            return self._node

    def _ended(self):
        state = _s(self.client.redis.hget(keyspace.job(self.id), "state"))
        return state != "running"

    def ask(self, timeout=None, wait=None):
        """The next trial, chosen by the job's searcher: a StudyTrial. It must be
        told within `timeout` seconds (default: the spec's trial.timeout, else
        no limit) or it goes back to the queue and runs again as a later
        attempt. Waits for a trial at most `wait` seconds (None: as long as it
        takes; then raises TimeoutError). Returns None when the job has ended
        (all its samples told, cancelled, or failed)."""
        if self._node is None and self._ended():
            return None
        node = self._attach()
        try:
            task = node.ask(wait=wait, timeout=timeout, should_end=self._ended)
        except NodeError as e:
            raise StudyError(str(e)) from None
        if task is None:
            if self._ended():
                return None
            raise TimeoutError("no trial of job %d within %gs (the job is at its concurrency, "
                               "its searcher waits for results, or the coordinator is away)"
                               % (self.id, wait))
        return StudyTrial(self, task)

    def _objective_metric(self):
        if self._metric is None:
            self._metric = _s(self.client.redis.hget(keyspace.job(self.id),
                                                      "objective_metric")) or ""
        return self._metric

    def tell(self, trial, value=None, state="succeeded", error=None, **metrics):
        """Ends a trial this process asked for. Its metrics as keywords (or
        `value` for a single objective metric); state "failed" with an error
        text for a run that went wrong (retried as trial.retries says).
        Raises StudyError for a trial this process does not hold, one told
        already, and metrics that are not finite numbers or UTF-8 text."""
        if not isinstance(trial, StudyTrial):
            raise StudyError("tell() takes the trial that ask() returned, not %r (a study "
                             "process tells only what it asked)" % (trial,))
        if trial._study is not self:
            raise StudyError("trial %d was asked by another study object" % trial.id)
        if trial.told:
            raise StudyError("trial %d was already told (%s); a trial is told once"
                             % (trial.id, trial.told))
        if self._node is None or self._node is not trial._node:
            raise StudyError("the study was closed after trial %d was asked: it went back to "
                             "the queue and runs again as a later attempt" % trial.id)
        pb = self._node._pb
        if state not in ("succeeded", "failed"):
            raise StudyError("state must be 'succeeded' or 'failed', not %r" % (state,))
        if value is not None:
            name = self._objective_metric()
            if not name:
                raise StudyError("tell(t, value) needs one objective metric; this job has "
                                 "several objectives or an expression: give the metrics by name")
            metrics = dict(metrics)
            metrics.setdefault(name, value)
        text = metrics_json("trial %d's metrics" % trial.id, metrics)
        if state == "failed":
            status = pb.TASK_FAILED
            err = error or "failed (told by the client)"
            if not isinstance(err, str):
                raise StudyError("error must be text, not %s" % type(err).__name__)
            _check_value("trial %d's error" % trial.id, err)
            if len(err.encode("utf-8")) > 64 << 10:
                err = err[: 16 << 10] + " ... (cut)"
        else:
            status = pb.TASK_SUCCEEDED
            err = ""
            if not metrics:
                raise StudyError("tell(t) of a success needs its metrics, e.g. "
                                 "study.tell(t, loss=0.12)")
        try:
            self._node.finish(trial._task, status, text, err, trial.reports)
        except NodeError as e:
            raise StudyError(str(e)) from None
        trial.told = "stopped" if trial._task.stopped is not None else state
        self._told[trial.id] = trial.told
        return trial.told

    def close(self, wait_acks=10.0):
        """Waits (up to wait_acks seconds) until every tell is safe in Redis,
        gives back trials asked and not told, and detaches."""
        node, self._node = self._node, None
        if node is not None:
            node.close(wait_acks)

    def unacked(self):
        """Tells not yet confirmed as recorded (they are sent again until they are)."""
        return self._node.unacked() if self._node else 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "Study(job=%d)" % self.id


def open_study(client, name=None, space=None, objective=None, objectives=None, search=None,
               early_stop=None, trial=None, spec=None, node_id=None, nodes=None, new=False,
               prefetch=0, constraints=None):
    """Opens the running study called `name` (a job with trial: {kind: client}),
    or submits a new one from these parts (or from `spec`, a dict). new=True
    always submits. prefetch=N holds N trials ready ahead of the asks (they
    show as running; a learning searcher chooses them from fewer results)."""
    if not name and not (spec and spec.get("name")):
        raise StudyError("a study needs a name: client.study(name='cg', space={...}, ...)")
    name = name or spec["name"]
    if not new:
        j = find_study(client, name)
        if j is not None:
            return Study(client, j, node_id=node_id, nodes=nodes, prefetch=prefetch)
    if spec is None:
        if space is None:
            raise StudyError("no running study is called %r; give space=, objective= (and "
                             "search=) to start one" % name)
        spec = {"name": name, "space": space}
        if objective is not None:
            spec["objective"] = objective
        if objectives is not None:
            spec["objectives"] = objectives
        if constraints is not None:
            spec["constraints"] = list(constraints)
        spec["search"] = dict(search or {})
        spec["search"].setdefault("samples", DEFAULT_SAMPLES)
        if early_stop is not None:
            spec["early_stop"] = {RAY_NAMES.get(k, k): v for k, v in early_stop.items()}
        spec["trial"] = dict(trial or {}, kind="client")
    else:
        spec = dict(spec, name=name)
        t = dict(spec.get("trial") or {})
        if t.get("kind", "client") != "client":
            raise StudyError("a study's trial.kind is client, not %r" % t.get("kind"))
        t["kind"] = "client"
        spec["trial"] = t
    job = client.submit(spec)
    return Study(client, job.id, node_id=node_id, nodes=nodes, prefetch=prefetch)
