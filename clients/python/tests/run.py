#!/usr/bin/env python3
"""Runs the cgq Python package's tests (pytest) under a Python that has what
the package needs: $CGQ_PYTHON, else this interpreter, else /usr/bin/python3
(Debian's, which python3-zmq, python3-protobuf, python3-redis and
python3-pytest install into; the python3 first on PATH may be another one).
conftest.py then makes the venv and installs the package into it.

    python3 clients/python/tests/run.py [test_client.py ...] [-- pytest args]

ctest runs one entry per test_*.py (clients/CMakeLists.txt). Exits with
pytest's status, or 77 (ctest's skip) when no Python here has the modules.
"""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NEEDED = ("zmq", "google.protobuf", "redis", "pytest", "venv", "ensurepip")


def usable(python):
    if not python or not os.access(python, os.X_OK):
        return False
    code = "import %s" % ", ".join(NEEDED)
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def main(argv):
    candidates = [os.environ.get("CGQ_PYTHON"), sys.executable, "/usr/bin/python3"]
    python = next((p for p in candidates if usable(p)), None)
    if python is None:
        print("skipped: no Python here imports %s (apt-get install python3-zmq python3-protobuf "
              "python3-redis python3-pytest python3-venv; tried %s)" % (
                  ", ".join(NEEDED), ", ".join(p for p in candidates if p)))
        return 77
    files, extra = [], []
    if "--" in argv:
        i = argv.index("--")
        files, extra = argv[:i], argv[i + 1:]
    else:
        files = argv
    paths = [f if os.path.isabs(f) else os.path.join(HERE, f) for f in files] or [HERE]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    # Not from clients/python: `python -m pytest` puts the working directory
    # on sys.path, and there the source tree would shadow the installed cgq.
    cwd = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
    cmd = [python, "-m", "pytest", "-p", "no:cacheprovider", "-rfEs", "--rootdir", HERE,
           ] + extra + paths
    print("run.py: %s" % " ".join(cmd), flush=True)
    return subprocess.call(cmd, env=env, cwd=cwd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
