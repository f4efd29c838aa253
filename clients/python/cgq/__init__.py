"""cgq: the Python side of cgq.

Inside a trial (standard library only; importing this package needs nothing
else, so a trial script can put clients/python on sys.path and `import cgq`):

    import cgq
    p = cgq.params()
    cgq.report(epoch=3, val_loss=0.21)
    cgq.result(val_loss=0.2)
    cgq.checkpoint(epoch=3)      # after writing what resumes into cgq.checkpoint_dir()

The same functions live in cgq/trial.py, which also works on its own, copied
next to a script as cgq.py.

Outside, a client of a cgq cluster (docs/python.md; it needs pyzmq, protobuf
and redis, imported only when a Client is made):

    c = cgq.Client()                 # CGQ_REDIS, CGQ_COORDINATOR, CGQ_CURVE_*
    job = c.submit("tune.yaml")
    job.wait()
    print(job.best(), job.to_pandas())
"""

from .errors import (CgqError, ConnectionError, NotFound, RequestError,  # noqa: F401
                     SpecError, Timeout)
from .trial import (checkpoint, checkpoint_dir, in_cgq, params, report, result,  # noqa: F401
                    resume_step, trial_dir, write_result)

__all__ = ["params", "report", "result", "write_result", "trial_dir", "in_cgq",
           "checkpoint", "checkpoint_dir", "resume_step",
           "Client", "Job", "Trial", "local",
           "CgqError", "NotFound", "RequestError", "SpecError", "Timeout"]
# cgq.ConnectionError (a builtins.ConnectionError) is left out of __all__, so
# that `from cgq import *` does not shadow the builtin.

# The client's names are imported on first use, so that a trial's
# `import cgq` loads the standard library only.
_LAZY = {"Client": "client", "Job": "job", "Trial": "records", "local": "cluster"}


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError("module 'cgq' has no attribute %r" % name)
    import importlib
    value = getattr(importlib.import_module("." + mod, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
