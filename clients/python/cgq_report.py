"""cgq_report: the trial side of the cgq trial process contract, stdlib only.

    import cgq_report as cgq
    p = cgq.params()                      # {"lr": 0.01, "hidden": 128, ...}
    for epoch in range(8):
        ...
        cgq.report(epoch=epoch, val_score=score)

Under cgq-worker, reports go to the file descriptor named by CGQ_REPORT_FD
(fd 3): one JSON object per line, each one a progress report; the last one is
the trial's result unless the trial writes result.json (write_result). Outside
cgq (CGQ_REPORT_FD unset) the same lines go to stdout, so a script runs the
same way by hand.
"""

import json
import math
import os
import sys

__all__ = ["report", "params", "trial_dir", "write_result"]


def _clean(value):
    # JSON has no NaN/Infinity; a report holding one would be rejected as a
    # whole by the worker, so non-finite numbers become null instead.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _line(metrics):
    return json.dumps(_clean(metrics), separators=(",", ":"), default=str) + "\n"


def _report_fd():
    text = os.environ.get("CGQ_REPORT_FD", "")
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError("CGQ_REPORT_FD=%r is not a file descriptor number" % text)


def report(_metrics=None, **metrics):
    """Report one set of metrics (keyword arguments and/or a dict) as one line.

    The line is written with a single write() so that it is never interleaved
    with another writer, and is flushed at once.
    """
    merged = dict(_metrics or {})
    merged.update(metrics)
    data = _line(merged).encode("utf-8")
    fd = _report_fd()
    if fd is None:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def params():
    """The trial's params (CGQ_PARAMS) as a dict; {} outside cgq."""
    text = os.environ.get("CGQ_PARAMS", "")
    if not text:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("CGQ_PARAMS is not a JSON object: %.80s" % text)
    return value


def trial_dir():
    """The trial's own directory (CGQ_TRIAL_DIR); the current directory outside cgq."""
    return os.environ.get("CGQ_TRIAL_DIR") or os.getcwd()


def write_result(_metrics=None, **metrics):
    """Write result.json in the trial directory: the trial's final metrics,
    taking precedence over the last report. Written atomically (rename)."""
    merged = dict(_metrics or {})
    merged.update(metrics)
    path = os.path.join(trial_dir(), "result.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(_line(merged))
    os.replace(tmp, path)
    return path
