"""searcher: be the searcher of a cgq job, in your own process.

A job whose spec says `search: {algorithm: external}` gets its params from a
process outside the coordinator. serve_searcher() is that process's loop:

    from cgq.searcher import serve_searcher

    def suggest(space, pending, trial):
        # space:   the spec's space, as written ({"lr": {"loguniform": [1e-4, 0.1]}, ...})
        # pending: {trial id: params} of the suggestions sent and not finished yet
        # trial:   the id the params returned now will run as
        return {"lr": 10 ** random.uniform(-4, -1)}     # or None: nothing now

    def observe(t):
        # t: {"id", "state", "params", "metrics", "value", "error", "attempt"},
        # state one of succeeded, failed, stopped (early), cancelled
        print(t["id"], t["state"], t["value"])

    serve_searcher(client, job, suggest, observe, ahead=2)

It first replays every trial of the job that has finished (observe() for
each, in trial id order), then keeps `ahead` suggestions queued at the
coordinator (one Suggest request each, recorded in Redis before it is
answered) and calls observe() once for every trial that finishes, following
cgq:events. It returns the job's state when the job ends.

A searcher process that dies is replaced by starting another: it replays
every observation again, and the coordinator, which owns the trial ids,
runs each suggestion it recorded exactly once (trial i is the i-th
suggestion), so no trial is lost or doubled. One searcher process serves a
job at a time.

`client` is a cgq.Client, or anything with `redis` (a redis.Redis) and
`coordinator` (the control endpoint, tcp://HOST:7701), and for CURVE
`curve_secret` and `curve_server` (certificate files).
"""

import json
import math
import time

from . import keyspace

__all__ = ["serve_searcher", "send_suggestions", "job_spec", "SearcherError", "SuggestError"]

WIRE_VERSION = 1       # CGQ_WIRE_VERSION (common/wire.h)
TERMINAL = ("succeeded", "failed", "stopped", "cancelled")

# Redis names: cgq/keyspace.py (common/keyspace.h).
EVENTS = keyspace.EVENTS
_job_key = keyspace.job
_trial_key = keyspace.trial
_suggestions_key = keyspace.suggestions


class SearcherError(Exception):
    """The job cannot be served (not external, no such job, a bad spec)."""


class SuggestError(SearcherError):
    """The coordinator refused a Suggest: code 2 for bad input (nothing was
    queued), 1 for a failure (Redis away, the queue full: try again)."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _s(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _pb():
    from ._proto import pb2
    return pb2()


def job_spec(client, job):
    """The spec of job `job` as a dict (parsed from the YAML it was submitted
    with, cgq:job:{J} field spec). Raises SearcherError for an unknown job or
    a spec that does not parse."""
    text = _s(client.redis.hget(_job_key(job), "spec"))
    if text is None:
        raise SearcherError("no job %d in Redis (see cgq status)" % job)
    try:
        import yaml
    except ImportError:
        raise SearcherError("reading a job's spec needs PyYAML (apt-get install python3-yaml, "
                            "in a venv made with --system-site-packages)") from None
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SearcherError("job %d's spec does not parse as YAML here: %s" % (job, e)) from None
    if not isinstance(spec, dict):
        raise SearcherError("job %d's spec is not a mapping" % job)
    return spec


def _algorithm(spec):
    s = spec.get("search") or {}
    return s.get("algorithm", "random") if isinstance(s, dict) else "random"


class _Control:
    """Control requests of a serving searcher: the client's own (cgq.Client.request),
    or, for any object with `coordinator` and CURVE paths, a cgq.control.Control."""

    def __init__(self, client, timeout):
        self.timeout = timeout
        if hasattr(client, "request"):
            self._request = client.request
            self._own = None
        else:
            from .control import Control
            self._own = Control(getattr(client, "coordinator", None) or "tcp://127.0.0.1:7701",
                                getattr(client, "curve_secret", None),
                                getattr(client, "curve_server", None), timeout=timeout)
            self._request = lambda env, **kw: self._own.request(env, **kw)

    def close(self):
        if self._own is not None:
            self._own.close()

    def request(self, env):
        """Sends env, returns the Reply's (code, message); None when no answer
        came within the timeout."""
        from .errors import ConnectionError as Unanswered
        try:
            r = self._request(env, timeout=self.timeout, check=False)
        except Unanswered:
            return None
        if r.WhichOneof("body") != "reply":
            return 1, "unexpected answer %s" % r.WhichOneof("body")
        return r.reply.code, r.reply.message


def _suggest_env(job, params_list):
    pb = _pb()
    env = pb.Envelope(version=WIRE_VERSION)
    env.suggest.job = job
    for p in params_list:
        env.suggest.params_json.append(p if isinstance(p, str) else _dumps(p))
    return env


def _plain(v):
    """v with numpy scalars and arrays turned into Python values."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if hasattr(v, "tolist"):
        return _plain(v.tolist())
    if hasattr(v, "__float__"):
        return float(v)
    return v


def _dumps(params):
    return json.dumps(_plain(params), separators=(",", ":"), allow_nan=False)


def send_suggestions(client, job, params_list, timeout=10.0):
    """Sends one Suggest with params_list (dicts, or JSON text) for job. Returns
    the coordinator's message ("queued N (M waiting)") once they are recorded
    in Redis; raises SuggestError with its code otherwise (code 2: nothing was
    queued, the message names the bad param and what it allows), and
    TimeoutError when no answer came within timeout seconds (whether they
    were recorded is then in cgq:job:{J}:suggestions)."""
    ctl = _Control(client, timeout)
    try:
        r = ctl.request(_suggest_env(job, params_list))
    finally:
        ctl.close()
    if r is None:
        raise TimeoutError("no answer from the coordinator at %s within %gs" % (ctl.endpoint,
                                                                              timeout))
    code, msg = r
    if code != 0:
        raise SuggestError(code, msg)
    return msg


def _num(v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _json(v, default):
    v = _s(v)
    if not v:
        return default
    try:
        return json.loads(v)
    except ValueError:
        return default


def _trial_dict(tid, h):
    """A trial hash (HGETALL, bytes or text) as the dict observe() gets."""
    h = {_s(k): _s(v) for k, v in h.items()}
    attempt = h.get("attempt")
    return {
        "id": tid,
        "state": h.get("state") or "",
        "params": _json(h.get("params"), {}),
        "metrics": _json(h.get("metrics"), None),
        "value": _num(h.get("value")),
        "error": h.get("error") or None,
        "attempt": int(attempt) if attempt and attempt.isdigit() else 0,
    }


def _same_point(sent, recorded):
    """Whether the coordinator's recorded point is the one sent (its
    canonical form adds constants and may write 3.0 as 3)."""
    for k, v in sent.items():
        if k not in recorded:
            return False
        r = recorded[k]
        if isinstance(v, (int, float)) and not isinstance(v, bool) and \
                isinstance(r, (int, float)) and not isinstance(r, bool):
            if abs(float(v) - float(r)) > 1e-9 * max(1.0, abs(float(v))):
                return False
        elif isinstance(v, dict) and isinstance(r, dict):
            if "id" in v and v.get("id") != r.get("id"):
                return False
        elif v != r:
            return False
    return True


class _Server:
    def __init__(self, client, job, suggest, observe, ahead, poll, request_timeout, drain, log):
        self.client = client
        self.r = client.redis
        self.job = int(job)
        self.suggest = suggest
        self.observe = observe
        self.ahead = max(1, int(ahead))
        self.poll = poll
        self.drain = drain
        self.log = log or (lambda msg: None)
        self.ctl = _Control(client, request_timeout)
        self.seen = set()         # trial ids observed by this process
        self.outstanding = set()  # ids created, not observed yet
        self.created = 0          # trial ids below this were created (the job's suggested)
        self.pending = {}         # id -> params: sent and not finished
        self.last_event = "0-0"
        self.spec = job_spec(client, self.job)
        if _algorithm(self.spec) != "external":
            raise SearcherError("job %d searches with algorithm %s, not external: its own "
                                "searcher chooses the params (submit it with search: "
                                "{algorithm: external})" % (self.job, _algorithm(self.spec)))
        space = self.spec.get("space") or {}
        self.space = space if isinstance(space, dict) else {}

    # --- Redis reads --------------------------------------------------------

    def _job_state(self):
        """(state, suggested, total, queued): the job hash and the list's length."""
        p = self.r.pipeline(transaction=False)
        p.hmget(_job_key(self.job), "state", "suggested", "total")
        p.llen(_suggestions_key(self.job))
        (state, suggested, total), queued = p.execute()
        total = _s(total)
        return (_s(state) or "", int(_s(suggested) or 0),
                int(total) if total else None, int(queued))

    def _hashes(self, ids):
        out = {}
        ids = sorted(ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            p = self.r.pipeline(transaction=False)
            for t in chunk:
                p.hgetall(_trial_key(self.job, t))
            for t, h in zip(chunk, p.execute()):
                out[t] = h
        return out

    def _learn_created(self, suggested):
        if suggested > self.created:
            self.outstanding.update(range(self.created, suggested))
            self.created = suggested

    def _check(self, ids):
        """Observes every trial of ids that has finished and was not observed."""
        ids = [t for t in ids if t in self.outstanding]
        if not ids:
            return
        for t, h in sorted(self._hashes(ids).items()):
            d = _trial_dict(t, h)
            if d["state"] in TERMINAL and t not in self.seen:
                self.seen.add(t)
                self.outstanding.discard(t)
                self.pending.pop(t, None)
                if self.observe is not None:
                    self.observe(d)
            elif d["state"] and t not in self.pending:
                self.pending[t] = d["params"]

    # --- the steps ----------------------------------------------------------

    def replay(self):
        last = self.r.xrevrange(EVENTS, "+", "-", count=1)
        if last:
            self.last_event = _s(last[0][0])
        state, suggested, total, queued = self._job_state()
        self._learn_created(suggested)
        self._check(list(self.outstanding))
        if queued > suggested:
            for i, text in enumerate(self.r.lrange(_suggestions_key(self.job), suggested, -1)):
                self.pending[suggested + i] = _json(text, {})
        self.log("job %d: replayed %d finished trial(s); %d pending" % (
            self.job, len(self.seen), len(self.pending)))

    def _send(self, trial, params):
        """Sends one suggestion that is to be element `trial` of the list;
        returns True once it is recorded there."""
        key = _suggestions_key(self.job)
        text = _dumps(params)
        while True:
            r = self.ctl.request(_suggest_env(self.job, [text]))
            if r is not None and r[0] == 0:
                recorded = _json(self.r.lindex(key, trial), None)
                if not isinstance(recorded, dict) or not _same_point(params, recorded):
                    raise SearcherError(
                        "job %d: suggestion %d in %s is %r, not what this process sent (%s): is "
                        "another searcher process serving the job?" % (self.job, trial, key,
                                                                       recorded, text))
                return True
            # No answer (the coordinator restarting), or a failure: it may have
            # been recorded all the same; the list says.
            n = self.r.llen(key)
            if n > trial:
                recorded = _json(self.r.lindex(key, trial), None)
                if isinstance(recorded, dict) and _same_point(params, recorded):
                    return True
                raise SearcherError("job %d: suggestion %d was recorded by someone else (%r): "
                                    "is another searcher process serving the job?"
                                    % (self.job, trial, recorded))
            if r is not None and r[0] == 2:
                state = self._job_state()[0]
                if state != "running":
                    return False
                raise SuggestError(2, r[1])
            self.log("job %d: %s; sending again" % (
                self.job, r[1] if r else "no answer from the coordinator"))
            time.sleep(min(1.0, self.poll))

    def top_up(self):
        """Keeps `ahead` suggestions queued. Returns the job's state."""
        state, suggested, total, queued = self._job_state()
        self._learn_created(suggested)
        if state != "running":
            return state
        room = self.ahead - (queued - suggested)
        if total is not None:
            room = min(room, total - queued)
        while room > 0:
            params = self.suggest(self.space, dict(self.pending), queued)
            if params is None:
                break
            if not isinstance(params, dict):
                raise SearcherError("suggest() returned %r: give a dict of params (or None for "
                                    "nothing now)" % (params,))
            if not self._send(queued, params):
                return self._job_state()[0]
            self.pending[queued] = _plain(params)
            queued += 1
            room -= 1
        return state

    def follow(self):
        """Waits up to poll seconds for events; observes what finished."""
        got = self.r.xread({EVENTS: self.last_event}, count=1000,
                           block=max(1, int(self.poll * 1000)))
        ids, any_event = set(), False
        for _stream, entries in got or []:
            for eid, fields in entries:
                self.last_event = _s(eid)
                f = {_s(k): _s(v) for k, v in fields.items()}
                if f.get("job") != str(self.job):
                    continue
                any_event = True
                if f.get("trial"):
                    ids.add(int(f["trial"]))
                for item in (f.get("trials") or "").split():
                    ids.add(int(item.split(":", 1)[0]))
        if ids:
            state, suggested, _total, _queued = self._job_state()
            self._learn_created(suggested)
            self._check(ids)
        if not any_event:
            # Quiet: check the trials still out (events are capped at ~100,000
            # entries, and a trial's event may come before this process did).
            self._check(list(self.outstanding))

    def run(self):
        self.replay()
        try:
            while True:
                state = self.top_up()
                if state != "running":
                    break
                self.follow()
            # The job ended: what finished meanwhile, and what a cancel stops.
            end = time.monotonic() + self.drain
            while True:
                self._learn_created(self._job_state()[1])
                self._check(list(self.outstanding))
                if not self.outstanding or time.monotonic() >= end:
                    break
                time.sleep(min(0.2, self.poll))
            self.log("job %d is %s: %d trial(s) observed" % (self.job, state, len(self.seen)))
            return state
        finally:
            self.ctl.close()


def serve_searcher(client, job, suggest, observe=None, ahead=2, poll=1.0, request_timeout=10.0,
                   drain=10.0, log=None):
    """Serves job `job` (search: {algorithm: external}) until it ends; returns
    its final state ("finished", "cancelled" or "failed").

    suggest(space, pending, trial) -> dict of params, or None for "nothing
    now" (asked again after the next observation, or within `poll` seconds).
        space    the spec's space as written ({"lr": {"loguniform": [...]}}),
                 constants included (a suggestion may leave them out)
        pending  {trial id: params} of the suggestions sent and not finished
                 (queued or running): what a batch searcher should not
                 suggest again (on a restart, those of the process before)
        trial    the trial id the returned params will run as
      The params set every param of the space that is not a constant, each
      in its domain (docs/spec.md); the coordinator refuses anything else,
      naming the param, and serve_searcher raises SuggestError.

    observe(trial) is called once per finished trial of the job: first for
    every trial that had finished before (a replay, in id order), then as
    they finish. trial is a dict: id, state (succeeded, failed, stopped,
    cancelled), params, metrics (dict or None), value (the objective, float
    or None), error, attempt.

    ahead: suggestions kept queued at the coordinator (at least 1); keep it
    near the number of trials that can run at once, so that workers never
    wait while the searcher learns from as many results as possible.
    poll: seconds between checks when nothing happens. request_timeout: how
    long to wait for a Suggest's answer before asking again (the list in
    Redis tells whether it was recorded). drain: once the job ends, how long
    to wait for its last trials (a cancel stops the running ones) to be
    observed. log: a function taking one line, or None.
    """
    return _Server(client, job, suggest, observe, ahead, poll, request_timeout, drain,
                   log).run()
