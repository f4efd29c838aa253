"""cgq: the Python side of cgq.

Inside a trial (standard library only; importing this package needs nothing
else, so a trial script can put clients/python on sys.path and `import cgq`):

    import cgq
    p = cgq.params()
    cgq.report(epoch=3, val_loss=0.21)
    cgq.result(val_loss=0.2)

The same functions live in cgq/trial.py, which also works on its own, copied
next to a script as cgq.py.
"""

from .trial import in_cgq, params, report, result, trial_dir, write_result

__all__ = ["params", "report", "result", "write_result", "trial_dir", "in_cgq"]
