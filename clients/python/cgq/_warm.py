"""cgq._warm: search.warm_start resolved on the submitting side, as `cgq
submit` does it (cli/warm.c; docs/architecture.md, "Warm starts"): the named
jobs' succeeded trials read from Redis through this client's records code,
the points file (JSON lines) read from disk, sent as SubmitJob.warm_json.

The CLI checks every point with a searcher of the spec (C) before sending;
this client cannot run one, so it checks what it can here (the shape of
every line, the jobs, a param in common with the space) and leaves the
domain checks to the coordinator, which checks every point again and
refuses the submit naming the point's origin ("warm_start point 3
(seen.jsonl:5): ..."): a points line is then a SpecError at FILE:LINE, as
the CLI reports it; a job's trial is left out with a note and the spec sent
again (as the CLI leaves out a job's trial that does not fit), at most
MAX_RESENDS times.
"""

import csv
import json
import os
import re
import sys

from . import keyspace
from .errors import SpecError

MAX_WARM = 100000      # CGQ_SEARCH_MAX_WARM (common/searcher.h)
MAX_JOBS = 64          # spec_search.c's S_WARM_MAX_JOBS
MAX_RESENDS = 64       # job trials the coordinator may refuse before giving up
# Algorithms whose every point must give every param of the space.
WHOLE_POINTS = ("bayes", "cmaes", "evolution", "nsga2", "pbt")

_REFUSED = re.compile(r"warm_start point (\d+) \((.*?)\): (.*)\Z", re.S)
_FROM_JOB = re.compile(r"job (\d+) trial (\d+)\Z")


def _strict_pairs(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate object key '%s'" % k)
        d[k] = v
    return d


def _no_constant(name):
    raise ValueError("%s is not JSON" % name)


def _loads(line):
    """JSON as the CLI's jansson reads a points line: no NaN or Infinity, no
    duplicate keys."""
    return json.loads(line, object_pairs_hook=_strict_pairs, parse_constant=_no_constant)


def _is_json(v):
    try:
        json.dumps(v, allow_nan=False)
        return True
    except ValueError:
        return False


def _csv_value(text):
    """A CSV cell as the CLI reads it (cli/warm.c s_csv_value): a JSON
    number, true or false as such, anything else as text; None (no value)
    for an empty cell or null."""
    if text == "":
        return None
    try:
        v = json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return text
    if v is None:
        return None
    if isinstance(v, (bool, int)) or (isinstance(v, float) and v == v and abs(v) != float("inf")):
        return v
    return text


def _csv_fields(line):
    """A CSV line's fields (RFC 4180 quoting, no field spanning lines), as
    cli/warm.c's s_csv_split reads them."""
    try:
        return next(csv.reader([line.rstrip("\r\n")], strict=True))
    except csv.Error as e:
        raise ValueError("bad quoting: %s (a field in quotes cannot span lines; write \"\" "
                         "for a quote inside quotes)" % e) from None


def section(spec, text):
    """spec's search.warm_start as a dict, from the dict given or the YAML
    text; None when it has none or it is not a mapping (the coordinator's
    parser then says what is wrong, at its line and column)."""
    if spec is None:
        if "warm_start" not in text:
            return None, None
        try:
            import yaml
        except ImportError:
            raise SpecError("search.warm_start needs PyYAML in the submitting client (apt-get "
                            "install python3-yaml, in a venv made with "
                            "--system-site-packages); nothing was submitted") from None
        try:
            spec = yaml.safe_load(text)
        except yaml.YAMLError:
            return None, None  # the coordinator's parser reports it
    if not isinstance(spec, dict) or not isinstance(spec.get("search"), dict):
        return None, None
    w = spec["search"].get("warm_start")
    return (w if isinstance(w, dict) else None), spec


def _space_names(spec):
    space = spec.get("space")
    return set(space) if isinstance(space, dict) else None


def _variables(spec):
    """The params of the space that vary (a mapping such as {uniform: ...});
    a constant needs no value in a point."""
    space = spec.get("space")
    if not isinstance(space, dict):
        return []
    return [k for k, v in space.items() if isinstance(v, dict)]


def _notes(names, source, seen):
    extra = sorted(k for k in seen if k not in names)
    lack = sorted(k for k in names if k not in seen)
    if extra:
        sys.stderr.write("cgq: warm_start: %s: params not in this space, ignored: %s\n"
                         % (source, ", ".join(extra)))
    if lack:
        sys.stderr.write("cgq: warm_start: %s: no value for %s: its points are modelled "
                         "without them\n" % (source, ", ".join(lack)))


def _objective_metrics(spec):
    """The metrics the objectives name (an objective given otherwise, as an
    expression, is left to the coordinator's check)."""
    objs = spec.get("objectives")
    if not isinstance(objs, list):
        objs = [spec.get("objective")]
    return [o["metric"] for o in objs if isinstance(o, dict) and isinstance(o.get("metric"), str)]


def _job(client, spec, path, jid, out, left):
    """Adds job jid's succeeded trials to out (as the CLI's s_job)."""
    with client.redis_errors():
        h = client.redis.hgetall(keyspace.job(jid))
    if not h:
        raise SpecError("%s: search.warm_start.jobs: job %d does not exist (cgq status lists "
                        "the jobs); nothing was submitted" % (path, jid), path=path)
    from .job import Job
    trials = Job(client, jid).trials()
    names = _space_names(spec)
    whole = ((spec.get("search") or {}).get("algorithm") in WHOLE_POINTS)
    variables, metrics = _variables(spec), _objective_metrics(spec)
    seen, used, skipped, first = set(), 0, 0, None
    for t in trials:
        if t.state != "succeeded" or t.params is None or t.metrics is None or \
                not _is_json(t.params) or not _is_json(t.metrics):
            continue  # the CLI reads such a record as having none
        seen.update(t.params)
        # What the coordinator would refuse for sure: left out here, as the CLI does.
        why = None
        if whole:
            miss = [k for k in variables if k not in t.params]
            if miss:
                why = "it has no value for param %s" % miss[0]
        if why is None:
            miss = [m for m in metrics if not isinstance(t.metrics.get(m), (int, float))
                    or isinstance(t.metrics.get(m), bool)]
            if miss:
                why = "its metrics lack the objective %s" % miss[0]
        if why is not None:
            skipped += 1
            first = first or "trial %d: %s" % (t.id, why)
            continue
        out.append({"params": t.params, "metrics": t.metrics,
                    "from": "job %d trial %d" % (jid, t.id)})
        used += 1
    if seen and names is not None and not (seen & names):
        raise SpecError("%s: search.warm_start.jobs: job %d searched another space: no param in "
                        "common with this spec (its params: %s; this spec's: %s); nothing was "
                        "submitted" % (path, jid, ", ".join(sorted(seen)),
                                       ", ".join(sorted(names))), path=path)
    if names is not None:
        _notes(names, "job %d" % jid, seen)
    if skipped:
        left[jid] = [skipped, first]
    sys.stderr.write("cgq: warm_start: %d observation(s) from job %d\n" % (used, jid))


def _points(spec, points, out, texts):
    """Adds the points file's observations to out (as the CLI's s_points)."""
    try:
        with open(points, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SpecError("search.warm_start.points: cannot read %s: %s; nothing was submitted"
                        % (points, e.strerror or e), path=points) from None
    text = data.decode("utf-8", "replace")
    texts[points] = text
    seen, used = set(), 0
    is_csv = points.lower().endswith(".csv") and len(points) > 4
    header, names = None, _space_names(spec) or set()
    for lineno, line in enumerate(text.split("\n"), 1):
        s = line.strip(" \t\r")
        if not s or s.startswith("#"):
            continue

        def bad(why):
            return SpecError("%s:%d: %s; nothing was submitted" % (points, lineno, why),
                             path=points, line=lineno, text=text, reason=why)
        if is_csv:
            try:
                fields = _csv_fields(line)
            except ValueError as e:
                raise bad(str(e)) from None
            if header is None:
                for i, f in enumerate(fields):
                    if not f or f in fields[:i]:
                        raise bad("the header's column %d is %s (write the param and metric "
                                  "names, each once: x1,x2,loss)"
                                  % (i + 1, "a name given twice" if f else "empty"))
                header = fields
                continue
            if len(fields) != len(header):
                raise bad("%d fields where the header has %d (one value per column, empty for "
                          "none)" % (len(fields), len(header)))
            point = {"params": {}, "metrics": {}}
            for name, cell in zip(header, fields):
                v = _csv_value(cell)
                if v is not None:
                    point["params" if name in names else "metrics"][name] = v
            seen.update(point["params"])
            point["from"] = "%s:%d" % (points, lineno)
            out.append(point)
            used += 1
            continue
        try:
            o = _loads(line)
        except ValueError as e:
            raise bad("not JSON: %s (write one {\"params\": {...}, \"metrics\": {...}} per line)"
                      % e) from None
        if not isinstance(o, dict) or not isinstance(o.get("params"), dict) or \
                not isinstance(o.get("metrics"), dict):
            raise bad("a point needs \"params\" and \"metrics\", both objects (write "
                      "{\"params\": {\"lr\": 0.01}, \"metrics\": {\"loss\": 0.3}})")
        seen.update(o["params"])
        out.append({"params": o["params"], "metrics": o["metrics"],
                    "from": "%s:%d" % (points, lineno)})
        used += 1
    names = _space_names(spec)
    if used and names is not None and not (seen & names):
        raise SpecError("search.warm_start.points: %s: no param in common with this spec's space "
                        "(the points have: %s); nothing was submitted"
                        % (points, ", ".join(sorted(seen))), path=points)
    if names is not None:
        _notes(names, points, seen)
    sys.stderr.write("cgq: warm_start: %d observation(s) from %s\n" % (used, points))


def resolve(client, warm, spec, path, spec_dir, is_dict):
    """The observations of warm (search.warm_start) as a list for
    SubmitJob.warm_json, plus what resend() needs. Raises SpecError for a
    job that does not exist or searched another space, a points line that
    is not a point (FILE:LINE), a file that cannot be read."""
    out, left, texts = [], {}, {}
    jobs = warm.get("jobs")
    if isinstance(jobs, list) and 0 < len(jobs) <= MAX_JOBS and \
            all(isinstance(j, int) and not isinstance(j, bool) and j > 0 for j in jobs):
        for jid in jobs:
            _job(client, spec, path, jid, out, left)
    p = warm.get("points")
    if isinstance(p, str) and p:
        if p.startswith("/"):
            points = p
        elif is_dict:
            points = os.path.join(spec_dir, p)
        else:  # as the CLI: relative to the spec's path as written
            points = path[:path.rfind("/") + 1] + p
        _points(spec, points, out, texts)
    if len(out) > MAX_WARM:
        raise SpecError("%s: search.warm_start: %d observations, more than %d; nothing was "
                        "submitted" % (path, len(out), MAX_WARM), path=path)
    return out, left, texts


def refused(message, out, left, texts):
    """After the coordinator refused the submit with message: drops the
    job trial it names from out (True: send again), raises SpecError at
    FILE:LINE for a points line, False for any other refusal."""
    m = _REFUSED.search(message or "")
    if not m:
        return False
    i, origin, why = int(m.group(1)) - 1, m.group(2), m.group(3)
    if not 0 <= i < len(out) or out[i].get("from") != origin:
        return False
    j = _FROM_JOB.match(origin)
    if j:
        jid = int(j.group(1))
        entry = left.setdefault(jid, [0, None])
        entry[0] += 1
        entry[1] = entry[1] or "trial %s: %s" % (j.group(2), why)
        del out[i]
        return True
    points, _, line = origin.rpartition(":")
    if line.isdigit():
        raise SpecError("%s:%s: %s; nothing was submitted" % (points, line, why), path=points,
                        line=int(line), text=texts.get(points), reason=why)
    return False


def report_left(left):
    for jid in sorted(left):
        n, first = left[jid]
        sys.stderr.write("cgq: warm_start: job %d: %d succeeded trial(s) left out, they do not "
                         "fit this spec (first: %s)\n" % (jid, n, first))
