"""cgq._proto: the generated wire schema, cgq_pb2 (schemas/cgq.proto).

An installed package has cgq/cgq_pb2.py, which its build generated with
protoc. Run from a cgq checkout without installing (clients/python on
sys.path), there is none: then it is generated once per process into a
temporary directory, from ../../schemas/cgq.proto, when protoc is there.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

from .errors import CgqError

_module = None


def _from_checkout():
    here = os.path.dirname(os.path.abspath(__file__))
    proto = os.environ.get("CGQ_PROTO") or os.path.join(here, "..", "..", "..", "schemas",
                                                          "cgq.proto")
    protoc = os.environ.get("PROTOC") or shutil.which("protoc")
    if not os.path.isfile(proto) or not protoc:
        raise CgqError(
            "cgq.cgq_pb2 is missing: install the package (python3 -m venv "
            "--system-site-packages .venv && .venv/bin/pip install ./clients/python), which "
            "generates it from schemas/cgq.proto with protoc (apt-get install protobuf-compiler)")
    out = tempfile.mkdtemp(prefix="cgq-pb2-")
    try:
        r = subprocess.run([protoc, "--proto_path=" + os.path.dirname(os.path.abspath(proto)),
                            "--python_out=" + out, os.path.abspath(proto)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise CgqError("%s --python_out failed on %s: %s" % (
                protoc, proto, r.stderr.decode("utf-8", "replace").strip()))
        spec = importlib.util.spec_from_file_location("cgq.cgq_pb2",
                                                      os.path.join(out, "cgq_pb2.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules["cgq.cgq_pb2"] = mod
        spec.loader.exec_module(mod)
        return mod
    finally:
        shutil.rmtree(out, ignore_errors=True)


def pb2():
    """The module cgq_pb2 (Envelope, SubmitJob, Reply, ...)."""
    global _module
    if _module is None:
        try:
            found = importlib.util.find_spec("google.protobuf") is not None
        except ImportError:  # not even the namespace google
            found = False
        if not found:
            raise CgqError("the cgq client needs protobuf for Python (apt-get install "
                           "python3-protobuf, in a venv made with --system-site-packages)")
        try:
            from . import cgq_pb2 as mod
        except ImportError:
            mod = _from_checkout()
        _module = mod
    return _module


WIRE_VERSION = 1  # CGQ_WIRE_VERSION of common/wire.h: Envelope.version
