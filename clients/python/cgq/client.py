"""cgq.client: the Client, which talks to a cgq cluster as the CLI does: it
reads Redis (the coordinator is its only writer) and sends requests to the
coordinator's control endpoint (cgq.control). docs/python.md is the guide.

redis (python3-redis), pyzmq and protobuf are imported when a Client is
made, never when the package is imported.
"""

import contextlib
import json
import math
import os
import re
import sys
import urllib.parse

from . import _local_run, _proto, _warm, keyspace, records
from .control import Control
from .errors import CgqError, ConnectionError, NotFound, RequestError, SpecError
from .job import Job

DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
DEFAULT_COORDINATOR = "tcp://127.0.0.1:7701"
DEFAULT_MAX_SPEC = 1 << 20  # the CLI's and the coordinator's default --max-spec

_URL_FORMS = ("redis://[[user]:password@]host[:port][/db], unix:///path[?db=N&user=U&password=P] "
              "or sentinel://[[user]:password@]host[:port][,host[:port]...]/master_name[/db]")


def parse_bytes(text):
    """A size as `--max-spec` reads it: 4M, 512K, 1G, 1048576 (1024-based)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(?:([KMGTP])(?:i?[Bb])?)?\s*", str(text), re.I)
    if not m:
        raise ValueError("'%s' is not a size (write e.g. 4M)" % text)
    mult = 1024 ** ("KMGTP".index(m.group(2).upper()) + 1) if m.group(2) else 1
    return int(float(m.group(1)) * mult)


def mask_url(url):
    """url with its password replaced by *** (for messages)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    at = rest.rfind("@")
    if at >= 0:
        cred = rest[:at]
        user, colon, _ = cred.partition(":")
        rest = (user + ":***" if colon else "***") + rest[at:]
    rest = re.sub(r"(password=)[^&]*", r"\1***", rest)
    return scheme + sep + rest


def redis_kwargs(url):
    """The keyword arguments of redis.Redis for a cgq Redis URL (the forms of
    common/store.c). Raises CgqError naming the forms for a bad URL."""
    def bad(why):
        return CgqError("bad Redis URL '%s': %s (expected %s; check redis= / CGQ_REDIS)"
                        % (mask_url(url), why, _URL_FORMS))

    unq = urllib.parse.unquote
    if url.startswith("unix://"):
        path, _, query = url[len("unix://"):].partition("?")
        if not path.startswith("/"):
            raise bad("the socket path must be absolute (unix:///path)")
        if len(path) < 2:
            raise bad("no socket path")
        kw = {"unix_socket_path": path, "db": 0}
        for item in filter(None, query.split("&")):
            k, _, v = item.partition("=")
            if k == "db":
                if not v.isdigit():
                    raise bad("db= must be a number")
                kw["db"] = int(v)
            elif k in ("user", "password"):
                kw["username" if k == "user" else "password"] = unq(v) or None
            else:
                raise bad("unknown query parameter '%s' (known: db, user, password)" % k)
        return kw
    if url.startswith("sentinel://"):
        return _sentinel_kwargs(url, bad)
    if not url.startswith("redis://"):
        raise bad("unknown scheme")
    rest = url[len("redis://"):]
    kw = {"db": 0, "port": 6379}
    at = rest.rfind("@")  # a password may hold '/' unescaped: the last '@' ends it
    if at >= 0:
        cred, rest = rest[:at], rest[at + 1:]
        user, colon, pw = cred.partition(":")
        if colon:
            kw["username"] = unq(user) or None
            kw["password"] = unq(pw) or None
        else:  # redis://secret@host: the single field is the password
            kw["password"] = unq(user) or None
    hostport, slash, db = rest.partition("/")
    host, port = _host_port(hostport, None, bad, sentinel=False)
    if port is not None:
        kw["port"] = port
    if db:
        if not db.isdigit():
            raise bad("the database after '/' must be a number")
        kw["db"] = int(db)
    kw["host"] = host
    return kw


def _host_port(item, default_port, bad, sentinel=True):
    """(host, port) of HOST[:PORT] or [V6]:PORT: a sentinel's, or (sentinel
    false) a redis:// URL's, each refused in its own words."""
    if item.startswith("["):
        close = item.find("]")
        if close < 0:
            raise bad("missing ']' after %s IPv6 address" % ("an" if sentinel else "the"))
        host, port = item[1:close], item[close + 1:]
        if port and not port.startswith(":"):
            raise bad("expected ':port' after ']'")
        port = port[1:]
    else:
        host, _, port = item.partition(":")
    if not host:
        raise bad("a sentinel without a host (an empty entry between commas?)" if sentinel
                  else "no host")
    if port and (not port.isdigit() or not 1 <= int(port) <= 65535):
        raise bad("%s port must be a number from 1 to 65535" % ("a sentinel's" if sentinel
                                                                  else "the"))
    return host, int(port) if port else default_port


def _sentinel_kwargs(url, bad):
    """sentinel://[[user]:password@]h1[:p1][,h2[:p2]...]/NAME[/db], as
    common/store.c reads it: {"sentinels": [(host, port)...], "service_name",
    "db", and the master's "username"/"password"}. The sentinels' own user
    and password come from CGQ_SENTINEL_USER / CGQ_SENTINEL_PASSWORD."""
    unq = urllib.parse.unquote
    rest = url[len("sentinel://"):]
    kw = {"db": 0}
    at = rest.rfind("@")
    if at >= 0:
        cred, rest = rest[:at], rest[at + 1:]
        user, colon, pw = cred.partition(":")
        if colon:
            kw["username"] = unq(user) or None
            kw["password"] = unq(pw) or None
        else:
            kw["password"] = unq(user) or None
    hosts, slash, tail = rest.partition("/")
    if not slash:
        raise bad("no /MASTER_NAME after the sentinels")
    name, _, db = tail.partition("/")
    if not name:
        raise bad("no master name after '/'")
    if db:
        if not db.isdigit():
            raise bad("the database after the master name must be a number")
        kw["db"] = int(db)
    if not hosts:
        raise bad("no sentinel address")
    kw["sentinels"] = [_host_port(h, 26379, bad) for h in hosts.split(",")]
    kw["service_name"] = name
    return kw


def _spec_value_problem(v, where):
    """Why v cannot go into a spec as YAML (JSON) text, or None."""
    if v is None or isinstance(v, (bool, int)):
        return None
    if isinstance(v, float):
        return None if math.isfinite(v) else (
            "%s is %r: a spec holds finite numbers only (JSON and cgq have no NaN or infinity)"
            % (where, v))
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError as e:
            return ("%s is not valid text: %s (the spec goes to the coordinator as UTF-8; decode "
                    "bytes with errors='replace' or fix the source)" % (where, e.reason))
        if "\0" in v:
            return "%s holds a NUL character, which a spec cannot" % where
        return None
    if isinstance(v, (bytes, bytearray)):
        return ("%s is bytes, not text (decode it: value.decode('utf-8'); a spec is YAML text)"
                % where)
    if isinstance(v, dict):
        for k, x in v.items():
            if not isinstance(k, str):
                return "%s has the key %r, which is not text (a spec's keys are names)" % (where, k)
            p = _spec_value_problem(k, "the key %r of %s" % (k, where))
            if p:
                return p
            p = _spec_value_problem(x, "%s.%s" % (where, k) if where != "the spec" else k)
            if p:
                return p
        return None
    if isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            p = _spec_value_problem(x, "%s[%d]" % (where, i))
            if p:
                return p
        return None
    return ("%s is a %s, which is not a YAML value (use dicts, lists, text, numbers, booleans "
            "and None)" % (where, type(v).__name__))


class Client:
    """A connection to a cgq cluster: Redis, and the coordinator's control
    endpoint. Arguments default as the CLI's options do: CGQ_REDIS,
    CGQ_COORDINATOR, CGQ_CURVE_SECRET, CGQ_CURVE_SERVER and CGQ_MAX_SPEC.

    redis: a URL (redis://[[user]:password@]host[:port][/db], unix:///path.sock)
      or a redis.Redis of your own; coordinator: the control endpoint, or a
      list "EP1,EP2" of a leader and its standbys; curve_secret / curve_server:
      paths of `cgq keygen` certificates (this user's NAME.key_secret, the
      coordinator's public .key); timeout: seconds a request or a Redis
      command may take; max_spec: the largest spec sent (bytes or "4M").

    With no redis= and no CGQ_REDIS, in a directory where `cgq run` left its
    state (./.cgq), the client reads that run, as `cgq results` there does:
    through the run's redis-server while it runs (and its coordinator for
    requests), else through one started on its data now and stopped by
    close() or at exit.

    Otherwise nothing is contacted until a method needs it; bad arguments (a
    URL that does not parse, a certificate that does not load) raise here."""

    def __init__(self, redis=None, coordinator=None, curve_secret=None, curve_server=None,
                 timeout=5.0, max_spec=None):
        try:
            import redis as redis_mod
        except ImportError:
            raise CgqError("the cgq client needs redis for Python (apt-get install python3-redis, "
                           "in a venv made with --system-site-packages)")
        self._redis_mod = redis_mod
        self.timeout = float(timeout)
        self.local_run = None  # the state of a `cgq run` here (cgq/_local_run.py)
        if redis is None:
            redis = os.environ.get("CGQ_REDIS")
        if redis is None:
            run = _local_run.find()
            if run is not None:
                self.local_run = run.open()
                redis = run.url
                sys.stderr.write("cgq: reading the state of the cgq run in ./%s%s (redis= or "
                                 "CGQ_REDIS reads another)\n"
                                 % (_local_run.LOCAL_DIR, ", which is running" if run.running
                                    else ""))
        if redis is None:
            redis = DEFAULT_REDIS
        if isinstance(redis, (str, bytes)):
            self.redis_url = os.fsdecode(redis)
            kw = redis_kwargs(self.redis_url)
            common = dict(socket_timeout=self.timeout,
                          socket_connect_timeout=min(self.timeout, 2.0))
            if "sentinels" in kw:
                # The master as the sentinels name it, found again on a
                # failover (a READONLY reply or a lost connection asks again).
                from redis.sentinel import Sentinel
                skw = dict(common)
                if os.environ.get("CGQ_SENTINEL_PASSWORD"):
                    skw["password"] = os.environ["CGQ_SENTINEL_PASSWORD"]
                    if os.environ.get("CGQ_SENTINEL_USER"):
                        skw["username"] = os.environ["CGQ_SENTINEL_USER"]
                sentinels, name = kw.pop("sentinels"), kw.pop("service_name")
                self.sentinel = Sentinel(sentinels, sentinel_kwargs=skw, **common)
                self.redis = self.sentinel.master_for(
                    name, decode_responses=True, encoding_errors="replace", **kw, **common)
            else:
                self.redis = redis_mod.Redis(decode_responses=True, encoding_errors="replace",
                                             **common, **kw)
        else:
            self.redis = self._decoding(redis)
            self.redis_url = self._describe(redis)
        self.redis_where = mask_url(self.redis_url)
        self.coordinator = (coordinator or os.environ.get("CGQ_COORDINATOR")
                            or (self.local_run and self.local_run.coordinator)
                            or DEFAULT_COORDINATOR)
        # None: from the environment; "" turns CURVE off whatever it says.
        if curve_secret is None:
            curve_secret = os.environ.get("CGQ_CURVE_SECRET")
        if curve_server is None:
            curve_server = os.environ.get("CGQ_CURVE_SERVER")
        self.curve_secret = os.fspath(curve_secret) if curve_secret else None
        self.curve_server = os.fspath(curve_server) if curve_server else None
        if max_spec is None:
            max_spec = os.environ.get("CGQ_MAX_SPEC") or DEFAULT_MAX_SPEC
        try:
            self.max_spec = parse_bytes(max_spec) if isinstance(max_spec, str) else int(max_spec)
        except ValueError as e:
            raise CgqError("max_spec: %s" % e)
        self._control = Control(self.coordinator, self.curve_secret, self.curve_server,
                                self.timeout)
        self.local = None  # cgq.local() sets its cluster here

    # -- plumbing (for cgq.study too)

    def _decoding(self, r):
        kwargs = dict(r.connection_pool.connection_kwargs)
        if kwargs.get("decode_responses"):
            return r
        kwargs.update(decode_responses=True, encoding_errors="replace")
        pool = self._redis_mod.ConnectionPool(connection_class=r.connection_pool.connection_class,
                                              **kwargs)
        return self._redis_mod.Redis(connection_pool=pool)

    @staticmethod
    def _describe(r):
        kw = r.connection_pool.connection_kwargs
        if kw.get("path"):
            return "unix://%s?db=%s" % (kw["path"], kw.get("db", 0))
        return "redis://%s:%s/%s" % (kw.get("host", "?"), kw.get("port", "?"), kw.get("db", 0))

    @property
    def pb2(self):
        """The generated module of schemas/cgq.proto (cgq.cgq_pb2)."""
        return _proto.pb2()

    @contextlib.contextmanager
    def redis_errors(self):
        """Turns the redis package's errors into cgq errors that say what to
        check: `with client.redis_errors(): client.redis.hgetall(...)`."""
        ex = self._redis_mod.exceptions
        try:
            yield
        except ex.AuthenticationError as e:
            raise ConnectionError("authentication failed at Redis %s: %s (check the user and "
                                  "password in redis= / CGQ_REDIS)" % (self.redis_where, e),
                                  self.redis_where) from None
        except (ex.ConnectionError, ex.TimeoutError) as e:
            if self.redis_url.startswith("sentinel://"):
                raise ConnectionError("cannot find or reach the master through the sentinels of "
                                      "%s: %s (are redis-sentinel and the master running? check "
                                      "redis= / CGQ_REDIS, and CGQ_SENTINEL_PASSWORD)"
                                      % (self.redis_where, e), self.redis_where) from None
            raise ConnectionError("cannot reach Redis at %s: %s (is redis-server running? check "
                                  "redis= / CGQ_REDIS)" % (self.redis_where, e),
                                  self.redis_where) from None
        except ex.ResponseError as e:
            text = str(e)
            if text.startswith("NOAUTH"):
                raise ConnectionError("authentication required by Redis at %s: %s (put the "
                                      "password in redis= / CGQ_REDIS: redis://:PASSWORD@host:"
                                      "port/db)" % (self.redis_where, text),
                                      self.redis_where) from None
            if text.startswith("NOPERM"):
                raise CgqError("Redis at %s refused this user: %s (check the Redis user's ACL: "
                               "docs/security.md)" % (self.redis_where, text)) from None
            raise CgqError("Redis at %s answered: %s" % (self.redis_where, text)) from None

    def request(self, body, message=None, *, timeout=None, check=True, **fields):
        """One request to the coordinator's control endpoint; returns the
        reply Envelope (cgq_pb2). body is an Envelope, or the name of its
        field ("submit_job", "cancel_job", "ping", ...) set from message or
        from fields. Raises cgq.ConnectionError when no coordinator answers
        within timeout (default: the client's), and, with check, RequestError
        for a Reply with a code other than 0 (.code 1 failure, 2 bad input)."""
        env = body if not isinstance(body, str) else self._control.envelope(body, message, **fields)
        return self._control.request(env, timeout=timeout, check=check)

    def close(self):
        self._control.close()
        try:
            self.redis.close()
        except Exception:
            pass
        if self.local_run is not None:
            self.local_run.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "cgq.Client(redis=%r, coordinator=%r%s)" % (
            self.redis_where, self.coordinator, ", curve" if self.curve_secret else "")

    # -- studies (ask and tell: cgq/study.py)

    def study(self, name=None, **kwargs):
        """A study: trials asked for and told by this program (docs/python.md)."""
        from .study import open_study
        return open_study(self, name=name, **kwargs)

    # -- the coordinator

    def ping(self, timeout=None):
        """The coordinator's epoch (an int): proof that it answers."""
        reply = self.request("ping", timeout=timeout)
        text = reply.reply.message if reply.WhichOneof("body") == "reply" else ""
        m = re.search(r"epoch (\d+)", text)
        return int(m.group(1)) if m else None

    def submit(self, spec, spec_dir=None, timeout=None):
        """Submits a spec: a path of a YAML file, or a dict shaped like one.
        Returns its Job. A spec the coordinator (or this client, before
        sending) refuses raises SpecError with .path, .line, .col.

        A dict goes as JSON text (valid YAML) under the path "<dict>"; its
        {spec_dir} is spec_dir, default the current directory. A file's
        {spec_dir} is its own directory, as with `cgq submit`.

        search.warm_start is resolved here, as `cgq submit` does: the named
        jobs' succeeded trials read from this client's Redis, the points
        file (relative to the spec's directory) read from disk, both sent
        with the spec (docs/spec.md, Warm starts); a missing job, a job of
        another space, a bad line of the file (SpecError at FILE:LINE) are
        refused before anything is created."""
        if isinstance(spec, dict):
            path = "<dict>"
            problem = _spec_value_problem(spec, "the spec")
            if problem:
                raise SpecError("%s: %s; nothing was submitted" % (path, problem), path=path)
            text = json.dumps(spec, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
            data = text.encode("utf-8")
            spec_dir = os.path.abspath(spec_dir or os.getcwd())
        elif isinstance(spec, (str, os.PathLike)):
            path = os.fspath(spec)
            try:
                with open(path, "rb") as f:
                    data = f.read(self.max_spec + 1)
            except OSError as e:
                raise SpecError("%s: cannot read the spec: %s" % (path, e.strerror or e),
                                path=path) from None
            if len(data) > self.max_spec:
                raise SpecError("%s: the spec is longer than %d bytes, the largest this client "
                                "sends (raise max_spec= / CGQ_MAX_SPEC, and the coordinator's "
                                "--max-spec); nothing was submitted" % (path, self.max_spec),
                                path=path)
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                line = data[:e.start].count(b"\n") + 1
                col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
                raise SpecError("%s:%d:%d: the spec is not UTF-8 text here (byte 0x%02x); "
                                "nothing was submitted" % (path, line, col, data[e.start]),
                                path=path) from None
            if "\0" in text:
                i = text.index("\0")
                line = text.count("\n", 0, i) + 1
                col = i - (text.rfind("\n", 0, i) + 1) + 1
                raise SpecError("%s:%d:%d: the spec holds a NUL byte; nothing was submitted"
                                % (path, line, col), path=path, text=text)
            spec_dir = os.path.abspath(spec_dir) if spec_dir else \
                os.path.dirname(os.path.realpath(path))
        else:
            raise TypeError("submit() takes the path of a spec or a dict, not %s"
                            % type(spec).__name__)
        if len(data) > self.max_spec:
            raise SpecError("%s: the spec is longer than %d bytes, the largest this client sends "
                            "(raise max_spec= / CGQ_MAX_SPEC, and the coordinator's --max-spec); "
                            "nothing was submitted" % (path, self.max_spec), path=path)
        warm, parsed = _warm.section(spec if isinstance(spec, dict) else None, text)
        out = left = texts = None
        if warm is not None:
            out, left, texts = _warm.resolve(self, warm, parsed, path, spec_dir,
                                             isinstance(spec, dict))
        for _ in range(_warm.MAX_RESENDS + 1):
            msg = self.pb2.SubmitJob(spec_yaml=text, spec_path=path, spec_dir=spec_dir)
            if out is not None:
                msg.warm_json = json.dumps(out, ensure_ascii=False, allow_nan=False,
                                           separators=(",", ":"))
            reply = self.request("submit_job", msg, timeout=timeout, check=False)
            body = reply.WhichOneof("body")
            # A job's trial that does not fit the spec: left out, as the CLI does.
            if out is None or body != "reply" or reply.reply.code != 2 or \
                    not _warm.refused(reply.reply.message, out, left, texts):
                break
        if left:
            _warm.report_left(left)
        if body == "submit_reply":
            job = Job(self, reply.submit_reply.job)
            job.total = reply.submit_reply.trials or None
            return job
        if body == "reply":
            code, m = reply.reply.code, reply.reply.message
            if code == 2:
                raise SpecError(m or "%s: bad spec" % path, path=path, text=text)
            raise RequestError("the coordinator could not take %s: %s" % (
                path, m or "no reason given (see the coordinator's log)"), code=code, reply=reply)
        raise CgqError("the coordinator at %s answered SubmitJob with '%s'"
                       % (self.coordinator, body))

    # -- Redis reads

    def job(self, job_id):
        """The Job job_id; NotFound when Redis has no such job."""
        try:
            jid = int(job_id)
        except (TypeError, ValueError):
            raise NotFound("bad job id %r (expected a number such as 7; Client.jobs() lists the "
                           "jobs)" % (job_id,)) from None
        with self.redis_errors():
            exists = self.redis.exists(keyspace.job(jid))
        if not exists:
            raise NotFound("no job %d in Redis at %s (Client.jobs() lists the jobs)"
                           % (jid, self.redis_where))
        return Job(self, jid)

    def jobs(self, limit=None):
        """The jobs, newest first (as `cgq status` lists them); at most limit."""
        stop = -1 if not limit else int(limit) - 1
        with self.redis_errors():
            ids = self.redis.zrevrange(keyspace.JOBS, 0, stop)
        out = []
        for i in ids:
            try:
                out.append(Job(self, int(i)))
            except ValueError:
                continue
        return out

    def workers(self):
        """Every node the coordinator has seen (cgq:nodes), sorted by id, as
        dicts: id, kind, state (alive, dead, gone, unknown), stale (alive but
        silent for 10 s), hostname, pid, cpus, free_cpus, gpus, free_gpus,
        gpu_names, memory, running, connected, last_seen, labels, devices, full
        (why a worker takes no new task for now: its disk; "" when it does)."""
        with self.redis_errors():
            ids = sorted(self.redis.smembers(keyspace.NODES))
            pipe = self.redis.pipeline(transaction=False)
            for i in ids:
                pipe.hgetall(keyspace.node(i))
            hashes = pipe.execute()
        return [records.node_from(i, h) for i, h in zip(ids, hashes) if h]

    def hgetall_many(self, keys, chunk=1000):
        """HGETALL of each key (a dict, empty for a missing key), pipelined
        chunk keys to a round trip on one connection of the pool, each reply
        read as it comes (no per-command callbacks: 100,000 hashes in well
        under a second with hiredis)."""
        out = []
        pool = self.redis.connection_pool
        with self.redis_errors():
            conn = pool.get_connection("HGETALL")
            try:
                for base in range(0, len(keys), chunk):
                    part = keys[base:base + chunk]
                    # packed here: redis-py's pack_command costs more than the reply
                    conn.send_packed_command([b"".join(
                        b"*2\r\n$7\r\nHGETALL\r\n$%d\r\n%s\r\n" % (len(b), b)
                        for b in (k.encode("utf-8") for k in part))])
                    read = conn.read_response
                    for _ in part:
                        flat = read()
                        if isinstance(flat, dict):  # RESP3 or a callback: already a dict
                            out.append(flat)
                        else:
                            it = iter(flat)
                            out.append(dict(zip(it, it)))
            except BaseException:
                conn.disconnect()  # replies may be left unread: never reuse it
                raise
            finally:
                pool.release(conn)
        return out

    def load_trials(self, job_id, ids, metric=None, chunk=1000):
        """The trials of job_id with these ids (absent ones skipped), as
        cgq.Trial, read with hgetall_many; metric: the job's objective metric."""
        ids = list(ids)
        with records.gc_paused():
            hashes = self.hgetall_many([keyspace.trial(job_id, t) for t in ids], chunk)
            return records.trials_from(ids, hashes, metric)
