"""cgq.job: one job of a cgq cluster, read from Redis as the CLI reads it
(cli/view.c, cli/show.c) and cancelled over the control endpoint."""

import json
import os
import time

from . import keyspace, records
from .errors import CgqError, ConnectionError, NotFound, RequestError, Timeout
from .progress import Progress

# Columns of to_pandas() besides the params and metrics (a param or metric of
# one of these names, or one that is both a param and a metric, gets the
# prefix "params." or "metrics.", as in `cgq results --format csv`).
_BUILTIN_COLUMNS = ("id", "state", "value", "attempts", "node", "started", "finished",
                    "duration", "error")

_REDIS_GRACE_S = 5.0  # wait() rides out a Redis outage this long, as `cgq run` does


def _expand_event(eid, f):
    """One cgq:events entry as dicts, one per trial: a grouped entry ("trials":
    "12:1@w1 13:1@w1", docs/architecture.md "Events") becomes one per trial."""
    def ident(text):
        try:
            return int(text)
        except (TypeError, ValueError):
            return None

    try:
        at = int(eid.split("-", 1)[0]) / 1000.0
    except ValueError:
        at = None
    base = {"id": eid, "time": at, "type": f.get("type"), "job": ident(f.get("job")),
            "trial": ident(f.get("trial")), "attempt": ident(f.get("attempt")),
            "node": f.get("node") or None, "detail": f.get("detail") or None}
    if "trials" not in f:
        return [base]
    out = []
    for item in f["trials"].split():
        t, _, rest = item.partition(":")
        a, _, node = rest.partition("@")
        d = dict(base)
        d.update(trial=ident(t), attempt=ident(a), node=node or None)
        out.append(d)
    return out


def _tail(text, n):
    if not n:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[-int(n):])


class Job:
    """A job (cgq:job:{J}). Every method reads Redis afresh."""

    def __init__(self, client, job_id):
        self.client = client
        self.id = int(job_id)
        self.total = None  # trials the search will produce, when submit() was told

    def __repr__(self):
        return "cgq.Job(%d)" % self.id

    def __eq__(self, other):
        return isinstance(other, Job) and other.id == self.id and other.client is self.client

    def __hash__(self):
        return hash(self.id)

    @property
    def redis(self):
        return self.client.redis

    def _hash(self):
        with self.client.redis_errors():
            h = self.redis.hgetall(keyspace.job(self.id))
        if not h:
            raise NotFound("no job %d in Redis at %s (Client.jobs() lists the jobs)"
                           % (self.id, self.client.redis_where))
        return h

    # -- the job

    def status(self):
        """A dict: id, name, state (running, finished, cancelled, failed),
        counts (trials per state: pending running succeeded failed stopped
        cancelled unschedulable stale), done, total (None: unbounded),
        suggested (trials created so far), objective ({metric, mode} or None
        for several objectives), best ({trial, value} or None), error (why
        the job stopped itself), blocked (why trials are unschedulable),
        created, finished, spec_path, spec_dir."""
        return records.job_status(self.id, self._hash())

    @property
    def name(self):
        return self.status()["name"]

    @property
    def state(self):
        return self.status()["state"]

    def wait(self, progress=True, timeout=None, interval=0.2, stream=None):
        """Polls the job until it is over; returns its final state (finished,
        cancelled or failed). progress draws one line on stderr (stream),
        redrawn in place on a terminal or in a notebook, else a line per
        change at most every 2 s. Raises cgq.Timeout after timeout seconds
        (the job keeps running), cgq.ConnectionError when Redis stays away 5 s."""
        start = time.monotonic()
        bar = Progress(stream) if progress else None
        redis_lost = None
        try:
            while True:
                try:
                    st = self.status()
                    redis_lost = None
                except ConnectionError:
                    now = time.monotonic()
                    redis_lost = redis_lost or now
                    if now - redis_lost > _REDIS_GRACE_S:
                        raise
                    time.sleep(interval)
                    continue
                done = st["state"] in keyspace.JOB_DONE
                if bar is not None:
                    created = st["created"] or 0
                    end = st["finished"] if done and st["finished"] else time.time()
                    elapsed = end - created if created else time.monotonic() - start
                    bar.show(st, elapsed, final=done)
                if done:
                    return st["state"]
                if timeout is not None and time.monotonic() - start > timeout:
                    raise Timeout("job %d is still %s after %gs (%d/%s done); it keeps running "
                                  "(job.cancel() stops it)" % (
                                      self.id, st["state"], timeout, st["done"],
                                      st["total"] or "?"))
                time.sleep(interval)
        finally:
            if bar is not None:
                bar.close()

    def cancel(self, timeout=None):
        """Asks the coordinator to cancel the job (its running trials are
        stopped); returns its answer ("cancelled job 7: ..."). NotFound for a
        job it does not know."""
        reply = self.client.request("cancel_job", job=self.id, timeout=timeout, check=False)
        if reply.WhichOneof("body") != "reply":
            raise CgqError("the coordinator at %s answered CancelJob with '%s' instead of a reply"
                           % (self.client.coordinator, reply.WhichOneof("body")))
        code, msg = reply.reply.code, reply.reply.message
        if code == 0:
            return msg or "cancelled job %d" % self.id
        if code == 2:
            raise NotFound(msg or "the coordinator does not know job %d" % self.id)
        raise RequestError(msg or "cannot cancel job %d" % self.id, code=code, reply=reply)

    def pause(self, now=False, timeout=None):
        """Asks the coordinator to pause the job (`cgq pause`): nothing new
        starts, running trials stop at their next checkpoint (now=True: at
        once) and wait as paused. Returns its answer. NotFound for a job it
        does not know, RequestError for one that has ended."""
        return self._pause(False, now, timeout)

    def resume(self, timeout=None):
        """Asks the coordinator to resume the paused job (`cgq resume`):
        paused trials continue from their checkpoints. RequestError when it
        is not paused."""
        return self._pause(True, False, timeout)

    def _pause(self, resume, now, timeout):
        verb = "resume" if resume else "pause"
        reply = self.client.request("pause_job", job=self.id, now=now, resume=resume,
                                    timeout=timeout, check=False)
        if reply.WhichOneof("body") != "reply":
            raise CgqError("the coordinator at %s answered PauseJob with '%s' instead of a reply"
                           % (self.client.coordinator, reply.WhichOneof("body")))
        code, msg = reply.reply.code, reply.reply.message
        if code == 0:
            return msg or "%sd job %d" % (verb, self.id)
        if code == 2 and msg.startswith("no job"):
            raise NotFound(msg)
        raise RequestError(msg or "cannot %s job %d" % (verb, self.id), code=code, reply=reply)

    # -- trials

    def _metric(self, h=None):
        h = h if h is not None else self._hash()
        return h.get("objective_metric") or None

    def trials(self):
        """Every trial created so far, by id: a list of cgq.Trial, read with
        pipelined HGETALLs (1000 a round trip)."""
        h = self._hash()
        n = records.whole(h.get("suggested"))
        return self.client.load_trials(self.id, range(n), self._metric(h))

    def trial(self, trial_id):
        """One trial; NotFound when the job has no such trial."""
        h = self._hash()
        got = self.client.load_trials(self.id, [int(trial_id)], self._metric(h))
        if not got:
            n = records.whole(h.get("suggested"))
            raise NotFound("job %d has no trial %s (it has %d so far%s)" % (
                self.id, trial_id, n, ", ids 0 to %d" % (n - 1) if n else ""))
        return got[0]

    def top(self, k=10):
        """At most k succeeded trials, best first by the objective (mode
        respected), ties by id: the leaderboard (cgq:job:{J}:leaderboard).
        A job with several objectives has no ranking: see pareto()."""
        h = self._hash()
        metric = self._metric(h)
        if not metric or k <= 0:
            return []
        maximize = (h.get("objective_mode") or "max") not in ("min", "-1")
        # A few extra entries make up for ties that the id order settles.
        with self.client.redis_errors():
            rng = self.redis.zrevrange if maximize else self.redis.zrange
            ids = [int(i) for i in rng(keyspace.leaderboard(self.id), 0, k + 8)
                   if str(i).isdigit()]
        ranked = self._ranked(self.client.load_trials(self.id, ids, metric), maximize)
        if len(ranked) < k and len(ids) >= k + 9:  # stale entries: read them all
            ranked = self._ranked(self.trials(), maximize)
        return ranked[:k]

    @staticmethod
    def _ranked(trials, maximize):
        ok = [t for t in trials if t.state == "succeeded" and t.value is not None]
        ok.sort(key=lambda t: (-t.value if maximize else t.value, t.id))
        return ok

    def best(self):
        """The best succeeded trial by the objective, or None (no success yet,
        or several objectives: see pareto())."""
        top = self.top(1)
        return top[0] if top else None

    def pareto(self):
        """The trials on the Pareto front of a job with several objectives
        (cgq:job:{J}:pareto), by id, each with .objectives (its objective
        values). A job with one objective raises CgqError: best() is its answer."""
        h = self._hash()
        metric = self._metric(h)
        if metric:
            raise CgqError("job %d has one objective (%s): job.best() is its best trial; a "
                           "Pareto front is kept for jobs with `objectives:`" % (self.id, metric))
        with self.client.redis_errors():
            front = self.redis.hgetall(keyspace.pareto(self.id))
        vals = {}
        for k, v in front.items():
            try:
                vals[int(k)] = records.obj(v) or {}
            except ValueError:
                continue
        out = self.client.load_trials(self.id, sorted(vals), None)
        for t in out:
            t.objectives = vals[t.id]
        return out

    def to_pandas(self):
        """The trials as a pandas DataFrame, one row per trial, by id: id,
        state, value, one column per param, one per metric, attempts, node,
        started, finished, duration, error. A param or metric named like one
        of those columns, or like each other, is params.NAME / metrics.NAME
        (as in `cgq results --format csv`)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("Job.to_pandas() needs pandas: apt-get install python3-pandas "
                              "(and make the venv with --system-site-packages), or pip install "
                              "pandas; Job.trials() needs nothing more") from None
        with records.gc_paused():
            return self._frame(pd, self.trials())

    @staticmethod
    def _frame(pd, trials):
        pk, mk = {}, {}
        for t in trials:
            for k in t.params:
                pk.setdefault(k)
            for k in t.metrics:
                mk.setdefault(k)
        cols = {"id": [t.id for t in trials], "state": [t.state for t in trials],
                "value": [t.value for t in trials]}
        for k in pk:
            name = "params." + k if k in _BUILTIN_COLUMNS or k in mk else k
            cols[name] = [t.params.get(k) for t in trials]
        for k in mk:
            name = "metrics." + k if k in _BUILTIN_COLUMNS or k in pk else k
            cols[name] = [t.metrics.get(k) for t in trials]
        for name in _BUILTIN_COLUMNS[3:]:
            cols[name] = [getattr(t, name) for t in trials]
        if any(t.feasible is not None for t in trials):  # a spec with constraints
            cols["feasible"] = [t.feasible for t in trials]
        if any(t.lineage or t.exploited for t in trials):  # search pbt: the donor of each child
            cols["parent"] = [t.parent for t in trials]
        df = pd.DataFrame(cols)
        if not trials:  # no rows: keep the numeric columns numeric
            df = df.astype({"id": "int64", "value": "float64"})
        return df

    def reports(self, trial_id):
        """The trial's progress reports (cgq:job:{J}:reports:T, oldest
        first, at most the last ~1000), as dicts; lines that are not JSON
        objects are left out."""
        with self.client.redis_errors():
            entries = self.redis.xrange(keyspace.reports(self.id, int(trial_id)), "-", "+")
        out = []
        for _eid, fields in entries:
            try:
                v = json.loads(fields.get(keyspace.REPORT_FIELD, ""))
            except ValueError:
                continue
            if isinstance(v, dict):
                out.append(v)
        return out

    def logs(self, trial_id, stream="stdout", tail=None, stage=None):
        """A trial's output, as `cgq logs` finds it: stream ("stdout" or
        "stderr") of its trial directory when that directory is on this
        machine, else the log tail the worker sent with its result (the last
        few KiB of both streams together), else "". tail: only the last N
        lines. stage: a finished stage of a multi-stage trial, by name."""
        if stream not in ("stdout", "stderr"):
            raise ValueError("stream is 'stdout' or 'stderr', not %r" % (stream,))
        t = self.trial(trial_id)
        with self.client.redis_errors():
            sent = self.redis.hget(keyspace.trial(self.id, t.id), "log") or ""
        where = t.trial_dir
        if stage is not None:
            run = (t.runs or {}).get(stage)
            if run is None:
                raise NotFound("trial %d of job %d has no finished stage '%s' (finished: %s; "
                               "without stage= the attempt it is at)" % (
                                   t.id, self.id, stage, ", ".join(t.runs or {}) or "none"))
            where, sent = run.get("trial_dir"), ""
        if where and os.path.isdir(where):
            try:
                with open(os.path.join(where, stream + ".log"), "rb") as f:
                    return _tail(f.read().decode("utf-8", "replace"), tail)
            except FileNotFoundError:
                return ""
        return _tail(sent, tail)

    # -- events

    def events(self, from_start=False, block_ms=1000, timeout=None):
        """This job's events from cgq:events, live, as dicts: id (the stream
        entry's), time, type, job, trial, attempt, node, detail (None where
        the event has none). An entry that groups several trials (trial.running,
        trial.succeeded) gives one dict per trial. from_start: from the first
        event still in the stream, else only new ones. The generator ends
        after the job's own end (job.finished, job.cancelled, job.failed),
        when the job is over and the stream read to its end (its end event
        trimmed, or a job already over when called without from_start), or
        after timeout seconds. Each wait is an XREAD BLOCK of block_ms."""
        r = self.redis
        errors = self.client.redis_errors
        if from_start:
            last = "0-0"
        else:
            with errors():
                newest = r.xrevrange(keyspace.EVENTS, "+", "-", count=1)
            last = newest[0][0] if newest else "0-0"
            if self.status()["state"] in keyspace.JOB_DONE:
                return
        # XREAD BLOCK must return before the socket's own timeout.
        block_ms = max(1, min(int(block_ms), int(self.client.timeout * 1000 * 0.8)))
        deadline = None if timeout is None else time.monotonic() + timeout
        me = str(self.id)
        while True:
            wait = block_ms
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                wait = max(1, min(wait, int(left * 1000)))
            with errors():
                got = r.xread({keyspace.EVENTS: last}, count=1000, block=wait)
            if not got and self.status()["state"] in keyspace.JOB_DONE:
                # Over, and every event up to now read: its end event was
                # before `last`, or trimmed from the stream (MAXLEN ~100000).
                return
            for _stream, entries in got or []:
                for eid, fields in entries:
                    last = eid
                    if fields.get("job") != me:
                        continue
                    for ev in _expand_event(eid, fields):
                        yield ev
                    if fields.get("type") in keyspace.JOB_END_EVENTS:
                        return
