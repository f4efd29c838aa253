"""cgq_report: the older name of the cgq trial helpers, kept so existing trial scripts run.

    import cgq_report as cgq
    p = cgq.params()
    cgq.report(epoch=epoch, val_score=score)

New scripts should `import cgq` (the package clients/python/cgq, or its
cgq/trial.py copied as cgq.py), which has the same functions plus result().
This module needs one of those beside it and keeps its own behaviour outside
cgq: reports go to stdout (cgq uses stderr), and write_result() writes
result.json into the current directory.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    from cgq import trial as _cgq  # the package beside this file, or installed
except ImportError:
    import cgq as _cgq  # noqa: E402  cgq/trial.py copied here as cgq.py
finally:
    del sys.path[0]

__all__ = ["report", "params", "trial_dir", "write_result"]

params = _cgq.params
trial_dir = _cgq.trial_dir


def report(_metrics=None, **metrics):
    """One JSON line on CGQ_REPORT_FD (fd 3 under cgq-worker), else stdout."""
    _cgq._emit(_cgq._merge(_metrics, metrics), fallback=sys.stdout)


def write_result(_metrics=None, **metrics):
    """result.json in the trial directory (the current one outside cgq)."""
    return _cgq._write_result_file(_cgq._merge(_metrics, metrics), trial_dir())
