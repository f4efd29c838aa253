"""cgq_build: the PEP 517 build backend of the cgq Python package, in this tree.

pyproject.toml names it with `backend-path`, and it needs nothing outside the
standard library, so `pip install ./clients/python` works with no network:
pip's build isolation has nothing to download (a setuptools backend would
make it fetch setuptools from PyPI, which this house does not do).

What it builds:
  - a wheel (build_wheel): the package cgq/, cgq_report.py, and
    cgq/cgq_pb2.py, generated here by `protoc --python_out` from
    schemas/cgq.proto (never committed: .gitignore);
  - an editable install (build_editable, PEP 660): a .pth file naming this
    folder, with cgq/cgq_pb2.py generated beside the sources;
  - an sdist (build_sdist): the sources, with schemas/cgq.proto copied in.

The schema is found at $CGQ_PROTO, else ../../schemas/cgq.proto (this folder
is clients/python of a cgq checkout; pip 21.3+ builds a local folder in
place), else schemas/cgq.proto here (an sdist). protoc is $PROTOC, else
`protoc` on PATH.
"""

import base64
import email.message
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "cgq"
MODULES = ("cgq_report.py",)  # top-level modules shipped beside the package
GENERATED = "cgq_pb2.py"
WHEEL_TAG = "py3-none-any"


def _fail(msg):
    # One line on stderr that pip shows above its own summary, then exit 1.
    sys.exit("cgq build: " + msg)


# ---------------------------------------------------------------- pyproject


def _toml_value(text):
    text = text.strip()
    if text.startswith("["):
        return re.findall(r'"((?:[^"\\]|\\.)*)"', text)
    if text.startswith("{"):
        return dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', text))
    m = re.match(r'"((?:[^"\\]|\\.)*)"', text)
    return m.group(1) if m else text


def _strip_comment(line):
    """line without a # comment (a # inside a "string" stays)."""
    quoted = False
    for i, c in enumerate(line):
        if c == '"' and (i == 0 or line[i - 1] != "\\"):
            quoted = not quoted
        elif c == "#" and not quoted:
            return line[:i].rstrip()
    return line.rstrip()


def _mini_toml(text):
    """The subset of TOML pyproject.toml uses (tables, strings, arrays of
    strings, inline tables of strings), for Pythons without tomllib (< 3.11)."""
    out = {}
    table = out
    pending = None  # (key, lines) of an array over several lines
    for raw in text.splitlines():
        s = _strip_comment(raw).strip()
        if pending is not None:
            pending[1].append(s)
            if s.endswith("]"):
                table[pending[0]] = _toml_value(" ".join(pending[1]))
                pending = None
            continue
        if not s:
            continue
        m = re.match(r"^\[([\w.-]+)\]$", s)
        if m:
            table = out
            for part in m.group(1).split("."):
                table = table.setdefault(part, {})
            continue
        key, eq, value = s.partition("=")
        if not eq:
            continue
        key, value = key.strip(), value.strip()
        if value.startswith("[") and not value.endswith("]"):
            pending = (key, [value])
            continue
        table[key] = _toml_value(value)
    return out


def _project():
    path = os.path.join(ROOT, "pyproject.toml")
    with open(path, "rb") as f:
        data = f.read()
    try:
        import tomllib
        meta = tomllib.loads(data.decode("utf-8"))
    except ImportError:
        meta = _mini_toml(data.decode("utf-8"))
    project = meta.get("project") or {}
    for key in ("name", "version"):
        if not project.get(key):
            _fail("%s has no project.%s" % (path, key))
    return project


def _dist_name(project):
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _metadata(project):
    """METADATA (core metadata 2.1) of the package, as text."""
    m = email.message.Message()
    m["Metadata-Version"] = "2.1"
    m["Name"] = project["name"]
    m["Version"] = project["version"]
    if project.get("description"):
        m["Summary"] = project["description"]
    if project.get("requires-python"):
        m["Requires-Python"] = project["requires-python"]
    for dep in project.get("dependencies") or []:
        m["Requires-Dist"] = dep
    for extra, deps in (project.get("optional-dependencies") or {}).items():
        m["Provides-Extra"] = extra
        for dep in deps:
            m["Requires-Dist"] = '%s; extra == "%s"' % (dep, extra)
    readme = project.get("readme")
    body = ""
    if isinstance(readme, str) and os.path.isfile(os.path.join(ROOT, readme)):
        m["Description-Content-Type"] = "text/markdown"
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            body = f.read()
    head = m.as_string()
    return head.rstrip("\n") + "\n\n" + body


# ---------------------------------------------------------------- protoc


def _proto_file():
    env = os.environ.get("CGQ_PROTO")
    if env:
        if not os.path.isfile(env):
            _fail("CGQ_PROTO=%s is not a file (point it at schemas/cgq.proto of cgq)" % env)
        return os.path.abspath(env)
    tried = [os.path.join(ROOT, "..", "..", "schemas", "cgq.proto"),
             os.path.join(ROOT, "schemas", "cgq.proto")]
    for path in tried:
        if os.path.isfile(path):
            return os.path.abspath(path)
    _fail("cannot find the wire schema cgq.proto (looked at %s): build from a cgq "
          "checkout (clients/python), or set CGQ_PROTO to schemas/cgq.proto"
          % " and ".join(os.path.normpath(p) for p in tried))


def _generate_pb2():
    """The text of cgq_pb2.py, generated from cgq.proto by protoc."""
    proto = _proto_file()
    protoc = os.environ.get("PROTOC") or shutil.which("protoc")
    if not protoc:
        _fail("protoc not found, needed to generate cgq/cgq_pb2.py from %s "
              "(apt-get install protobuf-compiler, or set PROTOC)" % proto)
    out = tempfile.mkdtemp(prefix="cgq-build-")
    try:
        r = subprocess.run([protoc, "--proto_path=" + os.path.dirname(proto),
                            "--python_out=" + out, proto],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            _fail("%s --python_out failed on %s (exit %d): %s" % (
                protoc, proto, r.returncode, r.stderr.decode("utf-8", "replace").strip()))
        with open(os.path.join(out, GENERATED), encoding="utf-8") as f:
            return f.read()
    finally:
        shutil.rmtree(out, ignore_errors=True)


# ---------------------------------------------------------------- files


def _sources():
    """(path inside the package archive, absolute path) of every source file."""
    files = []
    pkg = os.path.join(ROOT, PACKAGE)
    for d, dirs, names in os.walk(pkg):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__" and not x.startswith("."))
        for name in sorted(names):
            if not name.endswith(".py") or (d == pkg and name == GENERATED):
                continue
            full = os.path.join(d, name)
            files.append((os.path.relpath(full, ROOT).replace(os.sep, "/"), full))
    for name in MODULES:
        files.append((name, os.path.join(ROOT, name)))
    return files


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _zip_time():
    # Reproducible archives: SOURCE_DATE_EPOCH when set, else 1980-01-01.
    t = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))
    return time.gmtime(max(t, 315532800))[:6]


class _Wheel:
    """A wheel being written: files go in with their RECORD line."""

    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.records = []

    def add(self, name, data):
        if isinstance(data, str):
            data = data.encode("utf-8")
        info = zipfile.ZipInfo(name, date_time=_zip_time())
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        self.records.append("%s,sha256=%s,%d" % (name, digest.decode("ascii"), len(data)))

    def close(self, dist_info):
        record = dist_info + "/RECORD"
        text = "\n".join(self.records + [record + ",,"]) + "\n"
        info = zipfile.ZipInfo(record, date_time=_zip_time())
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, text)
        self.zip.close()


def _dist_info_files(project):
    return {
        "METADATA": _metadata(project),
        "WHEEL": "Wheel-Version: 1.0\nGenerator: cgq_build\nRoot-Is-Purelib: true\n"
                 "Tag: %s\n" % WHEEL_TAG,
        "top_level.txt": "\n".join([PACKAGE] + [m[:-3] for m in MODULES]) + "\n",
    }


def _write_wheel(wheel_directory, editable):
    project = _project()
    dist = _dist_name(project)
    dist_info = "%s-%s.dist-info" % (dist, project["version"])
    name = "%s-%s-%s.whl" % (dist, project["version"], WHEEL_TAG)
    pb2 = _generate_pb2()
    os.makedirs(wheel_directory, exist_ok=True)
    w = _Wheel(os.path.join(wheel_directory, name))
    try:
        if editable:
            # The sources stay here; the generated module goes beside them
            # (ignored by git), and a .pth puts this folder on sys.path.
            with open(os.path.join(ROOT, PACKAGE, GENERATED), "w", encoding="utf-8") as f:
                f.write(pb2)
            w.add("__editable__.%s.pth" % dist, ROOT + "\n")
        else:
            for arc, full in _sources():
                w.add(arc, _read(full))
            w.add("%s/%s" % (PACKAGE, GENERATED), pb2)
        for fname, text in _dist_info_files(project).items():
            w.add("%s/%s" % (dist_info, fname), text)
    finally:
        w.close(dist_info)
    return name


# ---------------------------------------------------------------- PEP 517 / 660 hooks


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = _project()
    dist_info = "%s-%s.dist-info" % (_dist_name(project), project["version"])
    path = os.path.join(metadata_directory, dist_info)
    os.makedirs(path, exist_ok=True)
    for fname, text in _dist_info_files(project).items():
        with open(os.path.join(path, fname), "w", encoding="utf-8") as f:
            f.write(text)
    return dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = "%s-%s" % (_dist_name(project), project["version"])
    name = base + ".tar.gz"
    files = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
             ("README.md", os.path.join(ROOT, "README.md")),
             ("build_backend/cgq_build.py", os.path.abspath(__file__)),
             ("schemas/cgq.proto", _proto_file())] + _sources()
    os.makedirs(sdist_directory, exist_ok=True)
    mtime = int(os.environ.get("SOURCE_DATE_EPOCH", "315532800"))

    def add(tar, arc, data):
        info = tarfile.TarInfo("%s/%s" % (base, arc))
        info.size, info.mtime, info.mode = len(data), mtime, 0o644
        tar.addfile(info, io.BytesIO(data))

    path = os.path.join(sdist_directory, name)
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for arc, full in files:
            add(tar, arc, _read(full))
        add(tar, "PKG-INFO", _metadata(project).encode("utf-8"))
    return name
