"""optuna_search: any Optuna sampler as the searcher of a cgq job.

    python3 -m cgq.optuna_search JOB --sampler TPESampler [--sampler-args JSON] [--seed N]
    cgq optuna-search JOB --sampler TPESampler            (the same, through the CLI)

The job's spec says `search: {algorithm: external}`. This process maps the
job's space to Optuna distributions, replays every finished trial of the job
into an in-memory Optuna study (optuna.trial.create_trial + study.add_trial),
then asks the study for each new trial's params and tells it each result
(cgq/searcher.py: serve_searcher). Kill it and start it again at any time:
the new process replays what the old one learnt from, and the coordinator
runs every suggestion it recorded exactly once.

The space maps as follows (docs/spec.md): uniform, loguniform -> float (log);
randint -> int; quniform -> int or float with a step (the multiples of q in
[lo, hi]); qloguniform -> an int on a log scale counting multiples of q;
choice, grid -> categorical (its values, or their indices when a value is a
list or a mapping); repeat N of D -> N params NAME[0] ... NAME[N-1]; an
assignment -> one categorical per item, NAME.ITEM; constants pass through.
One objective -> direction; objectives: [...] -> directions (NSGAIISampler,
or any sampler Optuna allows for several), each read from the trial's
metrics by name.
"""

import argparse
import json
import math
import os
import sys

from .searcher import SearcherError, job_spec, serve_searcher

__all__ = ["OptunaSearcher", "map_space", "main"]


class MappingError(SearcherError):
    """Something of the job that Optuna cannot take."""


def _optuna():
    try:
        import optuna
    except ImportError:
        raise MappingError("cgq optuna-search needs Optuna (apt-get install python3-optuna, in a "
                           "venv made with --system-site-packages; or pip install optuna)") \
            from None
    return optuna


def _is_scalar(v):
    return v is None or isinstance(v, (bool, int, float, str))


class _Param:
    """One cgq param as Optuna params: names, distributions, and the two ways."""

    def __init__(self, name, dists, to_cgq, from_cgq):
        self.name = name
        self.dists = dists          # Optuna name -> distribution
        self.to_cgq = to_cgq        # {Optuna name: value} -> the cgq value
        self.from_cgq = from_cgq    # the cgq value -> {Optuna name: value}


def _num(x, what):
    if isinstance(x, str):
        # PyYAML reads 1e-3 (no dot) as text; cgq's reader as a number.
        try:
            x = int(x) if x.strip().lstrip("+-").isdigit() else float(x)
        except ValueError:
            pass
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise MappingError("%s: %r is not a number" % (what, x))
    return x


def _q_range(lo, hi, q):
    kmin, kmax = math.ceil(lo / q - 1e-9), math.floor(hi / q + 1e-9)
    return kmin, kmax


def _dist(name, d, what):
    """The Optuna distribution of one sampled param (or a repeat's element):
    (distribution, to_cgq(value), from_cgq(value))."""
    optuna = _optuna()
    D = optuna.distributions
    if not isinstance(d, dict) or len(d) != 1:
        raise MappingError("%s: %r cannot map to an Optuna distribution (expected one of "
                           "uniform, loguniform, randint, quniform, qloguniform, choice, grid)"
                           % (what, d))
    (kind, a), = d.items()
    ident = (lambda v: v, lambda v: v)
    if kind in ("uniform", "loguniform"):
        lo, hi = _num(a[0], what), _num(a[1], what)
        return (D.FloatDistribution(float(lo), float(hi), log=kind == "loguniform"),) + ident
    if kind == "randint":
        lo, hi = _num(a[0], what), _num(a[1], what)
        return (D.IntDistribution(int(lo), int(hi)),) + ident
    if kind in ("quniform", "qloguniform"):
        lo, hi, q = (_num(x, what) for x in a[:3])
        kmin, kmax = _q_range(lo, hi, q)
        if kmax < kmin:
            raise MappingError("%s: no multiple of %s in [%s, %s]" % (what, q, lo, hi))
        integral = all(isinstance(x, int) for x in (lo, hi, q))

        def value(k):
            v = k * q
            return int(v) if integral else float("%.15g" % v)
        if kind == "qloguniform":
            # Optuna has no log scale with a step: count the multiples instead.
            return (D.IntDistribution(int(kmin), int(kmax), log=kmin >= 1),
                    value, lambda v: int(round(v / q)))
        if integral:
            return (D.IntDistribution(int(kmin * q), int(kmax * q), step=int(q)),) + ident
        return (D.FloatDistribution(float(value(kmin)), float(value(kmax)), step=float(q)),
                lambda v: float("%.15g" % v), lambda v: v)
    if kind in ("choice", "grid"):
        if not isinstance(a, list) or not a:
            raise MappingError("%s: %s needs a non-empty list" % (what, kind))
        if all(_is_scalar(v) for v in a) and len(set(map(json.dumps, a))) == len(a):
            return (D.CategoricalDistribution(list(a)),) + ident
        # Lists or mappings: Optuna's categorical holds their indices.
        texts = [json.dumps(v, sort_keys=True) for v in a]
        return (D.CategoricalDistribution(list(range(len(a)))), lambda i: a[i],
                lambda v: texts.index(json.dumps(v, sort_keys=True)))
    raise MappingError("%s: %s cannot map to an Optuna distribution" % (what, kind))


def map_space(space):
    """The job's space (a dict as written in the spec) as a list of _Param,
    constants left out. Raises MappingError naming what cannot map."""
    out = []
    for name, d in (space or {}).items():
        what = "space param '%s'" % name
        if not isinstance(d, dict) or "value" in d and len(d) == 1:
            continue  # a constant
        if "repeat" in d:
            n, of = d.get("repeat"), d.get("of")
            if not isinstance(n, int) or n < 1:
                raise MappingError("%s: repeat must be a positive integer" % what)
            dist, to_c, from_c = _dist(name, of, what + " (its of:)")
            names = ["%s[%d]" % (name, i) for i in range(n)]
            out.append(_Param(
                name, {k: dist for k in names},
                lambda p, names=names, to_c=to_c: [to_c(p[k]) for k in names],
                lambda v, names=names, from_c=from_c: {k: from_c(x) for k, x in zip(names, v)}))
            continue
        if "assignment" in d:
            a = d["assignment"] or {}
            items, choices = a.get("items") or [], a.get("choices") or []
            if not items or not choices:
                raise MappingError("%s: an assignment needs items and choices" % what)
            items = [str(i) for i in items]
            choices = [str(c) for c in choices]
            D = _optuna().distributions
            names = ["%s.%s" % (name, i) for i in items]

            def to_c(p, names=names, choices=choices):
                ident = 0
                for k in reversed(range(len(names))):  # digit k is item k's choice
                    ident = ident * len(choices) + choices.index(p[names[k]])
                return {"id": ident}

            def from_c(v, names=names, items=items, choices=choices):
                m = v.get("map") if isinstance(v, dict) else None
                if isinstance(m, dict):
                    return {n: str(m[i]) for n, i in zip(names, items)}
                ident, out = int(v["id"]), {}
                for n in names:
                    out[n] = choices[ident % len(choices)]
                    ident //= len(choices)
                return out
            out.append(_Param(name, {n: D.CategoricalDistribution(choices) for n in names},
                              to_c, from_c))
            continue
        dist, to_c, from_c = _dist(name, d, what)
        out.append(_Param(name, {name: dist}, lambda p, name=name, to_c=to_c: to_c(p[name]),
                          lambda v, name=name, from_c=from_c: {name: from_c(v)}))
    return out


def _objectives(spec):
    """[(metric name or None for the trial's value, "maximize"|"minimize")]."""
    if spec.get("objectives"):
        out = []
        for i, o in enumerate(spec["objectives"]):
            if not isinstance(o, dict) or "metric" not in o:
                raise MappingError(
                    "objectives[%d] is an expression (expr:); cgq optuna-search reads each "
                    "objective's value from the trial's metrics by name: give objectives as "
                    "metric: NAME" % i)
            out.append((str(o["metric"]), "maximize" if o.get("mode") == "max" else "minimize"))
        return out
    o = spec.get("objective")
    if not isinstance(o, dict):
        raise MappingError("the job has no objective: an Optuna sampler learns from one (write "
                           "objective: {metric: NAME, mode: min} or objectives: [...])")
    return [(None, "maximize" if o.get("mode") == "max" else "minimize")]


class OptunaSearcher:
    """The suggest and observe of serve_searcher over an in-memory Optuna
    study with `sampler` for the job whose spec is `spec`."""

    def __init__(self, spec, sampler):
        optuna = _optuna()
        self.optuna = optuna
        self.params = map_space(spec.get("space") or {})
        self.dists = {}
        for p in self.params:
            self.dists.update(p.dists)
        self.objectives = _objectives(spec)
        directions = [d for _m, d in self.objectives]
        if len(directions) == 1:
            self.study = optuna.create_study(direction=directions[0], sampler=sampler)
        else:
            self.study = optuna.create_study(directions=directions, sampler=sampler)
        self.numbers = {}   # cgq trial id -> the Optuna Trial asked (or a replayed one's number)
        self.observed = 0

    def _optuna_params(self, params):
        out = {}
        for p in self.params:
            if p.name not in params:
                raise KeyError(p.name)
            out.update(p.from_cgq(params[p.name]))
        return out

    def _values(self, t):
        """The trial's objective values, or None when it has none."""
        if self.objectives[0][0] is None:
            return None if t["value"] is None else [t["value"]]
        m = t["metrics"] or {}
        vals = []
        for name, _d in self.objectives:
            v = m.get(name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                return None
            vals.append(float(v))
        return vals

    def suggest(self, space, pending, trial):
        # Pending suggestions of a process before this one: running in the
        # study, so that samplers that look at running trials see them.
        for tid, params in sorted(pending.items()):
            if tid not in self.numbers:
                self._add(params, self.optuna.trial.TrialState.RUNNING, None, tid)
        t = self.study.ask(self.dists)
        self.numbers[trial] = t
        return {p.name: p.to_cgq(t.params) for p in self.params}

    def _add(self, params, state, values, tid, intermediate=None):
        try:
            op = self._optuna_params(params)
            ft = self.optuna.trial.create_trial(
                params=op, distributions={k: self.dists[k] for k in op}, state=state,
                values=values, intermediate_values=intermediate)
        except (KeyError, ValueError, TypeError, IndexError) as e:
            print("cgq optuna-search: trial %d's params %s do not map to the study (%s); "
                  "skipped" % (tid, json.dumps(params), e), file=sys.stderr)
            return
        self.study.add_trial(ft)
        if state == self.optuna.trial.TrialState.RUNNING:
            self.numbers[tid] = self.study.trials[-1].number

    def observe(self, t):
        TS = self.optuna.trial.TrialState
        self.observed += 1
        vals = self._values(t)
        if t["state"] == "succeeded" and vals is not None:
            state = TS.COMPLETE
        elif t["state"] == "stopped":
            state = TS.PRUNED  # stopped early; its last report is its value
        else:
            state = TS.FAIL
        asked = self.numbers.pop(t["id"], None)  # an optuna Trial, or a replayed one's number
        if asked is not None:
            if state == TS.PRUNED and vals is not None and len(vals) == 1 and \
                    not isinstance(asked, int):
                asked.report(vals[0], 0)
            self.study.tell(asked, vals if state == TS.COMPLETE else None, state=state)
            return
        inter = {0: vals[0]} if state == TS.PRUNED and vals and len(vals) == 1 else None
        self._add(t["params"], state, vals if state == TS.COMPLETE else None, t["id"], inter)


def _sampler(name, args, seed):
    optuna = _optuna()
    cls = getattr(optuna.samplers, name, None)
    if cls is None or not isinstance(cls, type):
        known = sorted(n for n in dir(optuna.samplers) if n.endswith("Sampler") and
                       not n.startswith("Base"))
        raise MappingError("no sampler %s in optuna.samplers (Optuna %s has: %s)"
                           % (name, optuna.__version__, ", ".join(known)))
    kw = dict(args or {})
    if seed is not None:
        kw.setdefault("seed", seed)
    try:
        return cls(**kw)
    except TypeError as e:
        raise MappingError("optuna.samplers.%s(%s): %s" % (
            name, ", ".join("%s=%r" % kv for kv in kw.items()), e)) from None


class _Client:
    """What serve_searcher needs of a cgq.Client, from the command line."""

    def __init__(self, redis_url, coordinator, curve_secret=None, curve_server=None):
        import redis
        self.redis = redis.Redis.from_url(redis_url)
        self.coordinator = coordinator
        self.curve_secret = curve_secret
        self.curve_server = curve_server


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog=os.environ.get("CGQ_PROG") or "python3 -m cgq.optuna_search",
        description="An Optuna sampler as the searcher of cgq job JOB (its spec says search: "
                    "{algorithm: external}). Runs until the job ends; kill it and start it "
                    "again at any time.")
    ap.add_argument("job", metavar="JOB", type=int, help="the job id")
    ap.add_argument("--sampler", default="TPESampler",
                    help="a class of optuna.samplers: TPESampler (default), CmaEsSampler, "
                         "NSGAIISampler, RandomSampler, QMCSampler, ...")
    ap.add_argument("--sampler-args", default="{}", metavar="JSON",
                    help='keyword arguments of the sampler, a JSON object, e.g. '
                         '\'{"n_startup_trials": 5}\'')
    ap.add_argument("--seed", type=int, default=None, help="the sampler's seed")
    ap.add_argument("--ahead", type=int, default=2,
                    help="suggestions kept queued at the coordinator (default 2; about the "
                         "number of trials that run at once)")
    ap.add_argument("--redis", default=os.environ.get("CGQ_REDIS") or "redis://127.0.0.1:6379/0",
                    help="Redis URL (env CGQ_REDIS)")
    ap.add_argument("--coordinator",
                    default=os.environ.get("CGQ_COORDINATOR") or "tcp://127.0.0.1:7701",
                    help="the coordinator's control endpoint (env CGQ_COORDINATOR)")
    ap.add_argument("--curve-secret", default=os.environ.get("CGQ_CURVE_SECRET") or None,
                    help="CURVE: your secret certificate (env CGQ_CURVE_SECRET)")
    ap.add_argument("--curve-server", default=os.environ.get("CGQ_CURVE_SERVER") or None,
                    help="CURVE: the coordinator's public certificate (env CGQ_CURVE_SERVER)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    a = ap.parse_args(argv)
    try:
        try:
            sargs = json.loads(a.sampler_args)
        except ValueError as e:
            raise MappingError("--sampler-args is not JSON: %s" % e) from None
        if not isinstance(sargs, dict):
            raise MappingError("--sampler-args must be a JSON object of keyword arguments")
        optuna = _optuna()
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        client = _Client(a.redis, a.coordinator, a.curve_secret, a.curve_server)
        spec = job_spec(client, a.job)
        searcher = OptunaSearcher(spec, _sampler(a.sampler, sargs, a.seed))
        log = None if a.quiet else (lambda m: print("cgq optuna-search: " + m, file=sys.stderr))
        state = serve_searcher(client, a.job, searcher.suggest, searcher.observe, ahead=a.ahead,
                               log=log)
    except SearcherError as e:
        print("cgq optuna-search: %s" % e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # Redis or the coordinator unreachable, and the like
        import redis
        if isinstance(e, redis.exceptions.ConnectionError):
            print("cgq optuna-search: cannot reach Redis at %s: %s (set --redis or CGQ_REDIS)"
                  % (a.redis, e), file=sys.stderr)
        else:
            print("cgq optuna-search: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        return 1
    if not a.quiet:
        best = None
        try:
            best = searcher.study.best_trial if len(searcher.objectives) == 1 else None
        except ValueError:
            pass
        print("cgq optuna-search: job %d %s; %d trial(s) observed%s" % (
            a.job, state, searcher.observed,
            "; best value %g" % best.value if best is not None else ""), file=sys.stderr)
    return 0 if state == "finished" else 1


if __name__ == "__main__":
    sys.exit(main())
