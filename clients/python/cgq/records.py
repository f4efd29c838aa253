"""cgq.records: jobs, trials and nodes as the coordinator wrote them to Redis,
read as the CLI reads them (common/keyspace.c, cli/view.c): a missing or
malformed field reads as "unknown" (None), never as an error.
Standard library only.
"""

import contextlib
import dataclasses
import gc
import json
import math
import time
from typing import Any, Dict, Optional

from . import keyspace


def num(text):
    """A numeric field as float, or None when absent or not a number."""
    if text is None or text == "":
        return None
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def whole(text, default=0):
    """A count or id field as int (default when absent or not a number)."""
    try:
        return int(text)
    except (TypeError, ValueError):
        v = num(text)
        return int(v) if v is not None and math.isfinite(v) else default


def obj(text):
    """A JSON object field as dict, or None when absent or not an object."""
    if not text or text[0] != "{":
        return None
    try:
        v = json.loads(text)
    except ValueError:
        return None
    return v if isinstance(v, dict) else None


def _text(h, field):
    v = h.get(field)
    return v if v else None


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclasses.dataclass
class Trial:
    """One trial of a job (cgq:job:{J}:trial:T).

    value is the objective value (the trial's value field, else its objective
    metric); attempt the attempt it is at (attempts count on across the stages
    of a multi-stage trial), attempts how many times its most tried stage ran
    (the `attempts` of `cgq results`); started/finished are Unix seconds;
    duration the time it ran (every stage's, summed), as `cgq results` shows
    it. objectives is set by Job.pareto(): the trial's objective values."""

    id: int
    state: str
    params: Dict[str, Any]
    metrics: Dict[str, Any]
    value: Optional[float] = None
    attempt: int = 0
    node: Optional[str] = None
    error: Optional[str] = None
    started: Optional[float] = None
    finished: Optional[float] = None
    duration: Optional[float] = None
    warning: Optional[str] = None
    attempts: int = 0
    trial_dir: Optional[str] = None
    stage: int = 0
    stages: Optional[Dict[str, Any]] = None
    runs: Optional[Dict[str, Any]] = None
    objectives: Optional[Dict[str, float]] = None
    # A spec with constraints: whether the trial satisfies them, and by how
    # much each violated one is exceeded (docs/spec.md, constraints).
    feasible: Optional[bool] = None
    violation: Optional[Dict[str, Any]] = None
    # The latest checkpoint recorded (docs/architecture.md, Checkpoints).
    checkpoint: Optional[Dict[str, Any]] = None
    # search: {algorithm: pbt}: a child's lineage ({"parent": the donor,
    # "replaces", "step", "checkpoint", "changed": {"lr": [old, new]}}) and
    # parent (the donor's id); an exploited trial's end ({"by": the child,
    # "donor", "step"}). None otherwise.
    lineage: Optional[Dict[str, Any]] = None
    parent: Optional[int] = None
    exploited: Optional[Dict[str, Any]] = None

    @property
    def done(self):
        return self.state in keyspace.TRIAL_DONE


def _runs(h):
    runs = None
    for k, v in h.items():
        if k.startswith(keyspace.RUN_PREFIX):
            o = obj(v)
            if o is not None:
                if runs is None:
                    runs = {}
                runs[k[len(keyspace.RUN_PREFIX):]] = o
    return runs


def _tries(attempt, runs):
    """cgq_trial_rec_tries: how many times the most tried stage ran."""
    if not runs:
        return attempt
    ats = sorted(int(r.get("attempt")) for r in runs.values()
                 if is_number(r.get("attempt")) and r.get("attempt") > 0)
    prev = most = 0
    for a in ats:
        if a > prev and a - prev > most:
            most = a - prev
        prev = max(prev, a)
    if attempt > prev and attempt - prev > most:
        most = attempt - prev
    return most or attempt


def _run_time(duration, attempt, runs):
    """cgq_trial_rec_run_time: every finished stage's run, plus the attempt
    after the last one."""
    if not runs:
        return duration
    total, last = 0.0, 0
    for r in runs.values():
        d = r.get("duration")
        total += d if is_number(d) else 0.0
        a = r.get("attempt")
        if is_number(a) and a > last:
            last = int(a)
    if duration is not None and attempt > last:
        total += duration
    return total


def objs(texts):
    """obj() of each text, as one json.loads of them all when they are all
    objects (a thousand small loads cost ten times one big one)."""
    if texts and all(t and t[0] == "{" for t in texts):
        try:
            out = json.loads("[" + ",".join(texts) + "]")
            if len(out) == len(texts) and all(type(o) is dict for o in out):
                return out
        except ValueError:
            pass  # one of them is not JSON: each on its own
    return [obj(t) for t in texts]


def _positive(text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


_new = object.__new__


@contextlib.contextmanager
def gc_paused():
    """The cyclic garbage collector off for a bulk read: 100,000 trials make
    millions of objects, none of them cyclic, and the collector would scan
    them again and again (half the time of the parse)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def trial_fields(h, tid, params, metrics, metric):
    """The fields of a Trial, as a dict, from the HGETALL of its hash
    (str -> str) and its params and metrics already parsed (None: missing)."""
    get = h.get
    params = params if params is not None else {}
    metrics = metrics if metrics is not None else {}
    try:
        value = float(get("value"))
    except (TypeError, ValueError):
        value = None
        if metric:
            m = metrics.get(metric)
            if is_number(m):
                value = float(m)
    try:
        attempt = int(get("attempt"))
    except (TypeError, ValueError):
        attempt = whole(get("attempt"))
    started, finished = _positive(get("started")), _positive(get("finished"))
    try:
        duration = float(get("duration"))
    except (TypeError, ValueError):
        duration = finished - started if started is not None and finished is not None else None
    stages = runs = None
    attempts = attempt
    if "stages" in h:  # a multi-stage trial: run:STAGE fields are written with stages
        stages, runs = obj(get("stages")), _runs(h)
        duration, attempts = _run_time(duration, attempt, runs), _tries(attempt, runs)
    return {"id": tid, "state": get("state", ""), "params": params, "metrics": metrics,
            "value": value, "attempt": attempt, "node": get("node") or None,
            "error": get("error") or None, "started": started, "finished": finished,
            "duration": duration, "warning": get("warning") or None, "attempts": attempts,
            "trial_dir": get("trial_dir") or None,
            "stage": whole(get("stage")) if "stage" in h else 0, "stages": stages, "runs": runs,
            "objectives": None,
            "feasible": get("feasible") == "1" if get("feasible") in ("0", "1") else None,
            "violation": obj(get("violation")) if get("violation") else None,
            "checkpoint": obj(get("checkpoint")) if get("checkpoint") else None,
            "lineage": obj(get("lineage")) if get("lineage") else None,
            "parent": whole(get("parent")) if get("parent") else None,
            "exploited": obj(get("exploited")) if get("exploited") else None}


def trials_from(ids, hashes, metric=None):
    """Trials from HGETALL replies (dicts; empty ones, absent trials, are
    skipped) of the trials with these ids; metric: the job's objective metric,
    the value of a trial without a value field."""
    present = [(t, h) for t, h in zip(ids, hashes) if h]
    params = objs([h.get("params") for _, h in present])
    metrics = objs([h.get("metrics") for _, h in present])
    out = []
    for (t, h), p, m in zip(present, params, metrics):
        trial = _new(Trial)  # the dataclass's __init__ costs 3x this for 100,000 trials
        trial.__dict__ = trial_fields(h, t, p, m, metric)
        out.append(trial)
    return out


def trial_from(h, tid, metric=None):
    """A Trial from the HGETALL of a trial hash (str -> str); tid its id;
    metric the job's objective metric, for a trial without a value field."""
    return Trial(**trial_fields(h, tid, obj(h.get("params")), obj(h.get("metrics")), metric))


def job_status(jid, h):
    """Job.status()'s dict from the HGETALL of cgq:job:{J}."""
    metric = h.get("objective_metric") or None
    mode = h.get("objective_mode") or ""
    total = num(h.get("total"))
    best_trial, best_value = h.get("best_trial"), num(h.get("best_value"))
    best = None
    if best_trial not in (None, "") and best_value is not None:
        try:
            best = {"trial": int(best_trial), "value": best_value}
        except ValueError:
            best = None
    counts = {s: whole(h.get(s)) for s in keyspace.TRIAL_STATES}
    return {
        "id": jid,
        "name": h.get("name", ""),
        "state": h.get("state", ""),
        "counts": counts,
        "done": sum(counts[s] for s in keyspace.TRIAL_DONE),
        # total: trials the search will produce; None when unbounded
        "total": int(total) if total is not None and total > 0 else None,
        "suggested": whole(h.get("suggested")),
        "objective": {"metric": metric, "mode": "min" if mode in ("min", "-1") else "max"}
        if metric else None,
        "best": best,
        "error": h.get("error") or None,
        "blocked": h.get("blocked") or None,
        "created": num(h.get("created")),
        "finished": num(h.get("finished")) or None,
        "spec_path": h.get("spec_path", ""),
        "spec_dir": h.get("spec_dir", ""),
    }


def _count(text):
    """A node's gpus field: a number, a JSON list, or "0,1"."""
    if not text:
        return 0.0
    v = num(text)
    if v is not None:
        return v
    if text[0] == "[":
        try:
            a = json.loads(text)
            return float(len(a)) if isinstance(a, list) else 0.0
        except ValueError:
            return 0.0
    return float(len([x for x in text.split(",") if x.strip()]))


def node_from(node_id, h, now=None):
    """A dict of one node (cgq:node:ID), numbers as numbers. stale: alive
    but not heard from for 10 s (`cgq workers` shows it as dead?)."""
    now = time.time() if now is None else now
    last_seen = num(h.get("last_seen"))
    state = h.get("state", "")
    return {
        "id": node_id,
        "kind": h.get("kind", ""),
        "state": state,
        "stale": state == "alive" and (last_seen is None or now - last_seen > 10),
        "hostname": h.get("hostname", ""),
        "pid": whole(h.get("pid")),
        "cpus": num(h.get("cpus")) or 0.0,
        "free_cpus": num(h.get("free_cpus")) or 0.0,
        "gpus": _count(h.get("gpus")),
        "free_gpus": _count(h.get("free_gpus")),
        "gpu_names": h.get("gpu_names", ""),
        "memory": whole(h.get("memory")),
        "running": int(_count(h.get("running"))),
        "connected": h.get("connected") in ("1", "true", "yes"),
        "last_seen": last_seen,
        "labels": h.get("labels", ""),
        "devices": [d for d in h.get("devices", "").split(",") if d],
        "full": h.get("full", ""),
    }
