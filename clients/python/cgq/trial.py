"""cgq.trial: the trial side of a cgq job, in one file (Python 3 standard library only).

    import cgq                                # the package re-exports these functions
    p = cgq.params()                          # {"lr": 0.01, "hidden": 128, ...}
    for epoch in range(8):
        val_loss = train_one_epoch(p)
        cgq.report(epoch=epoch, val_loss=val_loss)
    cgq.result(val_loss=best, epochs=8)       # optional: result.json in the trial dir

This file stands alone: copy it next to your script as cgq.py (nothing else
is needed, `import cgq` then finds it), or install the cgq package
(clients/python, docs/python.md), or put clients/python on sys.path.

Under cgq-worker (docs/architecture.md, "Trial process contract"):
  - report() writes one JSON object per line to the descriptor named by
    CGQ_REPORT_FD (fd 3); each line is one progress report, and the last one
    is the trial's result unless the trial writes result.json;
  - params() is CGQ_PARAMS, a JSON object;
  - trial_dir() is CGQ_TRIAL_DIR, the trial's working directory;
  - result() writes result.json there (atomically), which takes precedence
    over the last report; a write that fails (a full disk) raises OSError
    "cgq: result.json could not be written: ..." and leaves no file behind;
  - checkpoint_dir() is CGQ_CHECKPOINT_DIR: write what the trial needs to
    resume there, then checkpoint(epoch=12) announces it: the worker seals
    the directory's content as the trial's latest checkpoint and gives the
    trial a new, empty one. A retried attempt (its worker lost, a failure)
    finds the latest checkpoint restored there, and resume_step() is the
    step it was announced at (None on a fresh start):

        start = (cgq.resume_step() or 0) + 1
        if start > 1:
            model.load(os.path.join(cgq.checkpoint_dir(), "model.pt"))
        for epoch in range(start, 11):
            ...
            model.save(os.path.join(cgq.checkpoint_dir(), "model.pt"))
            cgq.checkpoint(epoch=epoch)

Outside cgq the same script still runs:
  - report() and result() print the JSON line to stderr (result() writes no
    file), so nothing is lost and stdout stays the script's own;
  - params() reads CGQ_PARAMS if it is set, else NAME=VALUE words among the
    command line arguments (`python3 train.py lr=0.01 hidden=128`; VALUE is
    read as JSON when it parses, else kept as text), else returns {}.
  - A CGQ_REPORT_FD that names no open descriptor also falls back to stderr,
    with one warning;
  - checkpoint_dir() is ./checkpoint (made if missing), checkpoint() prints
    its line to stderr and keeps the directory, resume_step() is None.
"""

import json
import math
import os
import re
import sys
import time

__all__ = ["params", "report", "result", "write_result", "trial_dir", "in_cgq",
           "checkpoint", "checkpoint_dir", "resume_step"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_warned = []


def in_cgq():
    """True when running as a cgq trial (the worker set CGQ_TRIAL_DIR)."""
    return bool(os.environ.get("CGQ_TRIAL_DIR"))


def _clean(value):
    # JSON has no NaN or Infinity and the worker drops a line that holds one,
    # so non-finite numbers become null; tuples become lists, keys text.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _default(value):
    # numpy scalars and arrays, Decimal, Path, ...: numbers stay numbers.
    for attr in ("tolist", "item"):
        fn = getattr(value, attr, None)
        if callable(fn):
            try:
                return _clean(fn())
            except (TypeError, ValueError):
                pass
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    return f if math.isfinite(f) else None


def _line(metrics):
    return json.dumps(_clean(metrics), separators=(",", ":"), default=_default,
                      allow_nan=False) + "\n"


def _merge(first, kwargs):
    merged = {}
    if first is not None:
        if not isinstance(first, dict):
            raise TypeError("expected a dict of metrics, got %s" % type(first).__name__)
        merged.update(first)
    merged.update(kwargs)
    return merged


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _report_fd():
    """The report descriptor, or None outside cgq (or when it is not open)."""
    text = os.environ.get("CGQ_REPORT_FD", "")
    if not text:
        return None
    try:
        fd = int(text)
        os.fstat(fd)
        return fd
    except (ValueError, OSError) as e:
        if not _warned:
            _warned.append(True)
            sys.stderr.write("cgq: CGQ_REPORT_FD=%r is not an open descriptor (%s); "
                             "reports go to stderr\n" % (text, e))
        return None


def _emit(metrics, fallback=None):
    """One JSON line to the report fd, else to `fallback` (default stderr)."""
    data = _line(metrics).encode("utf-8")
    fd = _report_fd()
    if fd is not None:
        # one write() per line (a pipe write up to 4 KiB is atomic), so
        # reports from threads or children never interleave.
        _write_all(fd, data)
        return
    stream = fallback if fallback is not None else sys.stderr
    stream.flush()
    buf = getattr(stream, "buffer", None)
    if buf is not None:
        buf.write(data)
    else:
        stream.write(data.decode("utf-8"))
    stream.flush()


def report(_metrics=None, **metrics):
    """Report one set of metrics (keyword arguments and/or a dict) as one line.

    cgq.report(epoch=3, val_loss=0.21) or cgq.report({"val/loss": 0.21}).
    Values must be JSON-able (numbers, text, lists, dicts, None); NaN and
    infinities become null. Flushed at once.
    """
    _emit(_merge(_metrics, metrics))


def _parse_value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def params(argv=None):
    """The trial's params as a dict.

    Under cgq: CGQ_PARAMS. Outside: CGQ_PARAMS if set by hand, else the
    NAME=VALUE words of argv (default sys.argv[1:]), else {}.
    """
    text = os.environ.get("CGQ_PARAMS", "")
    if text:
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError("CGQ_PARAMS is not a JSON object: %.80s" % text)
        return value
    out = {}
    for word in (sys.argv[1:] if argv is None else argv):
        name, eq, value = word.partition("=")
        if eq and _NAME.match(name):
            out[name] = _parse_value(value)
    return out


def trial_dir():
    """The trial's directory (CGQ_TRIAL_DIR); the current directory outside cgq."""
    return os.environ.get("CGQ_TRIAL_DIR") or os.getcwd()


def _write_result_file(metrics, directory):
    path = os.path.join(directory, "result.json")
    tmp = path + ".tmp.%d" % os.getpid()
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(_line(metrics))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        # A full disk: the half-written file goes (its space with it), and the
        # trial learns it, since the worker cannot: without result.json its
        # result would be the last report. Not caught, it fails the trial.
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise OSError(e.errno, "cgq: result.json could not be written: %s" % e.strerror,
                      path) from e
    return path


def result(_metrics=None, **metrics):
    """The trial's final metrics: result.json in CGQ_TRIAL_DIR, which the
    worker takes as the result instead of the last report. Returns its path.

    Outside cgq (no CGQ_TRIAL_DIR) nothing is written: the line goes to
    stderr like a report, and None is returned.
    """
    merged = _merge(_metrics, metrics)
    directory = os.environ.get("CGQ_TRIAL_DIR")
    if not directory:
        _emit(merged)
        return None
    return _write_result_file(merged, directory)


write_result = result


def checkpoint_dir():
    """The directory a checkpoint is written into (CGQ_CHECKPOINT_DIR).

    It holds one checkpoint: after checkpoint() it is a new, empty directory
    (the worker took the old one over). Outside cgq: ./checkpoint, made if
    missing, which stays as it is.
    """
    directory = os.environ.get("CGQ_CHECKPOINT_DIR")
    if directory:
        return directory
    directory = os.path.join(os.getcwd(), "checkpoint")
    os.makedirs(directory, exist_ok=True)
    return directory


def resume_step():
    """The step this attempt resumes from, or None on a fresh start.

    CGQ_RESUME_STEP: the first number of the checkpoint() that sealed the
    checkpoint now in checkpoint_dir() (checkpoint(epoch=6) -> 6). Reports
    at or before it are not sent again (the attempt before sent them).
    """
    text = os.environ.get("CGQ_RESUME_STEP", "")
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _dir_id(directory):
    try:
        st = os.stat(directory)
        return (st.st_dev, st.st_ino)
    except OSError:
        return None


def checkpoint(_step=None, timeout=60.0, **step):
    """Announce that checkpoint_dir() holds a complete checkpoint, at a step.

    cgq.checkpoint(epoch=12): one line {"checkpoint": true, "epoch": 12} on
    the report descriptor. It is not a report (not in the learning curve,
    never the result): report metrics with report(). The worker then takes
    the directory over, seals it into the checkpoint store (sha256-checked
    when restored) and puts a new, empty one in its place; this call waits
    for that (up to timeout seconds, then it warns and returns), so that
    the next checkpoint written there cannot change this one. Returns the
    (new) checkpoint directory. Outside cgq the line goes to stderr and
    nothing is taken.
    """
    merged = _merge(_step, step)
    merged.pop("checkpoint", None)
    line = dict(checkpoint=True)
    line.update(merged)
    directory = checkpoint_dir()
    before = _dir_id(directory)
    fd = _report_fd()
    _emit(line)
    if fd is None:
        return directory
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        now = _dir_id(directory)
        if now is not None and now != before:
            return directory
        if time.monotonic() >= deadline:
            sys.stderr.write("cgq: the worker did not take %s over within %gs; the next "
                             "checkpoint is written over this one\n" % (directory, timeout))
            return directory
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
