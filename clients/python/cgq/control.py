"""cgq.control: one request to the coordinator's control endpoint, as the CLI
sends it (cli/ctl.c): a fresh REQ socket per request, bounded in time, with
a socket monitor so that a refused connection or a refused CURVE key fails at
once instead of waiting out the timeout.

Requests and replies are Envelopes of schemas/cgq.proto (docs/protocol.md,
"CLI requests"). pyzmq is imported when a Control is made.
"""

import os

from . import _proto
from .errors import ConnectionError, CgqError, RequestError

# An endpoint list "EP1,EP2" names a leader and its standbys; each gets a
# share of the time, at least this much (cli/ctl.c S_MIN_SHARE_MS).
_MIN_SHARE_S = 1.0


def _zmq():
    try:
        import zmq
    except ImportError:
        raise CgqError("the cgq client needs pyzmq (apt-get install python3-zmq, in a venv "
                       "made with --system-site-packages)")
    return zmq


def load_curve(secret_path, server_path):
    """(public, secret, server_public) Z85 keys from `cgq keygen` files, or
    None when both paths are empty. Raises CgqError saying what to set."""
    if not secret_path and not server_path:
        return None
    if not secret_path or not server_path:
        given, missing = (("curve_secret", "curve_server") if secret_path
                          else ("curve_server", "curve_secret"))
        raise CgqError("CURVE needs both keys: %s is set but %s is not (set curve_secret= to your "
                       "NAME.key_secret from `cgq keygen` and curve_server= to the coordinator's "
                       "public .key, or CGQ_CURVE_SECRET and CGQ_CURVE_SERVER)" % (given, missing))
    _zmq()
    import zmq.auth
    keys = []
    for path, what, need_secret in ((secret_path, "curve_secret", True),
                                    (server_path, "curve_server", False)):
        try:
            public, secret = zmq.auth.load_certificate(path)
        except (OSError, ValueError) as e:
            raise CgqError("cannot read the CURVE certificate %s (%s): %s (write one with "
                           "`cgq keygen NAME`)" % (path, what, e))
        if need_secret and not secret:
            raise CgqError("%s %s holds no secret key: give the NAME.key_secret file of "
                           "`cgq keygen`, not the public NAME.key" % (what, path))
        keys.append((public, secret))
    return keys[0][0], keys[0][1], keys[1][0]


class Control:
    """Requests to one coordinator control endpoint (or a list "EP1,EP2")."""

    def __init__(self, endpoint, curve_secret=None, curve_server=None, timeout=5.0):
        self.endpoint = endpoint
        self.curve_secret = curve_secret or None
        self.curve_server = curve_server or None
        self.timeout = float(timeout)
        self._keys = load_curve(self.curve_secret, self.curve_server)
        self._zmq = _zmq()
        self._ctx = None
        self._pid = None

    def _context(self):
        # A context per process: one inherited over fork is not usable.
        if self._ctx is None or self._pid != os.getpid():
            self._ctx = self._zmq.Context()
            self._pid = os.getpid()
        return self._ctx

    def close(self):
        if self._ctx is not None and self._pid == os.getpid():
            self._ctx.term()
        self._ctx = None

    def envelope(self, body, message=None, **fields):
        """An Envelope with body `body` (its field name: "submit_job",
        "cancel_job", "ping", ...) set from message or from fields."""
        pb2 = _proto.pb2()
        env = pb2.Envelope(version=_proto.WIRE_VERSION)
        try:
            part = getattr(env, body)
        except AttributeError:
            raise CgqError("no request '%s' in cgq.proto's Envelope (its fields: %s)" % (
                body, ", ".join(f.name for f in env.DESCRIPTOR.fields if f.name != "version")))
        if message is not None:
            part.CopyFrom(message)
        else:
            part.SetInParent()
            for k, v in fields.items():
                setattr(part, k, v)
        return env

    def request(self, env, timeout=None, check=True):
        """Sends the Envelope env and returns the reply Envelope. Raises
        cgq.ConnectionError when no coordinator answers in time (or refuses
        the connection or this CURVE key), and, with check, RequestError when
        the reply is a Reply with a code other than 0."""
        if not env.version:
            env.version = _proto.WIRE_VERSION
        data = env.SerializeToString()
        timeout = self.timeout if timeout is None else float(timeout)
        eps = [e.strip() for e in self.endpoint.replace(" ", ",").split(",") if e.strip()]
        if not eps:
            raise CgqError("no coordinator endpoint given (set coordinator= or CGQ_COORDINATOR, "
                           "e.g. tcp://127.0.0.1:7701)")
        share = timeout if len(eps) == 1 else max(timeout / len(eps), _MIN_SHARE_S)
        last = None
        for ep in eps:
            try:
                raw = self._request_one(ep, data, share)
                break
            except ConnectionError as e:
                if getattr(e, "final", False):
                    raise
                last = e
        else:
            raise last
        pb2 = _proto.pb2()
        reply = pb2.Envelope()
        try:
            reply.ParseFromString(raw)
        except Exception:
            raise ConnectionError("the coordinator at %s answered with a frame that does not "
                                  "decode (is it the same cgq version as this client?)"
                                  % self.endpoint, self.endpoint)
        if check and reply.WhichOneof("body") == "reply" and reply.reply.code != 0:
            raise RequestError(reply.reply.message or "the coordinator refused the request "
                               "(code %d; see its log)" % reply.reply.code,
                               code=reply.reply.code, reply=reply)
        return reply

    def _request_one(self, ep, data, timeout):
        zmq = self._zmq
        ctx = self._context()
        sock = ctx.socket(zmq.REQ)
        mon = None
        try:
            sock.linger = 0
            ms = max(1, int(timeout * 1000))
            sock.sndtimeo = ms
            sock.rcvtimeo = ms
            if self._keys:
                public, secret, server = self._keys
                sock.curve_publickey = public
                sock.curve_secretkey = secret
                sock.curve_serverkey = server
            events = (zmq.EVENT_CONNECTED | zmq.EVENT_CONNECT_RETRIED | zmq.EVENT_DISCONNECTED
                      | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                      | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
            try:
                mon = sock.get_monitor_socket(events)
            except zmq.ZMQError:
                mon = None
            try:
                sock.connect(ep)
            except zmq.ZMQError as e:
                err = ConnectionError("bad coordinator endpoint '%s': %s (expected "
                                      "tcp://HOST:PORT; check coordinator= / CGQ_COORDINATOR)"
                                      % (ep, e), ep)
                err.final = True
                raise err
            return self._exchange(sock, mon, ep, data, timeout)
        finally:
            if mon is not None:
                try:
                    sock.disable_monitor()
                except zmq.ZMQError:
                    pass
                mon.close(0)
            sock.close(0)

    def _exchange(self, sock, mon, ep, data, timeout):
        import time
        zmq = self._zmq
        from zmq.utils.monitor import recv_monitor_message
        waited = " within %gs" % timeout

        def unreachable(why):
            return ConnectionError(
                "cannot reach the coordinator at %s%s (is cgq-coordinator running? check "
                "coordinator= / CGQ_COORDINATOR)" % (ep, why), ep)

        deadline = time.monotonic() + timeout
        try:
            sock.send(data)
        except zmq.Again:
            raise unreachable(waited)
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        if mon is not None:
            poller.register(mon, zmq.POLLIN)
        connected = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise unreachable(waited)
            ready = dict(poller.poll(max(1, int(left * 1000))))
            if mon is not None and mon in ready:
                while True:
                    try:
                        ev = recv_monitor_message(mon, zmq.NOBLOCK)["event"]
                    except zmq.Again:
                        break
                    if ev == zmq.EVENT_CONNECTED:
                        connected = True
                    elif ev == zmq.EVENT_CONNECT_RETRIED and not connected:
                        raise unreachable(": connection refused")
                    elif ev in (zmq.EVENT_HANDSHAKE_FAILED_AUTH,
                                zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
                                zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
                        err = ConnectionError(self._handshake_failed(ep, ev), ep)
                        err.final = True
                        raise err
                    elif ev == zmq.EVENT_DISCONNECTED and connected and sock not in ready:
                        raise ConnectionError(
                            "the coordinator at %s closed the connection while this %d-byte "
                            "request was on its way (larger than it accepts? see its log)"
                            % (ep, len(data)), ep)
            if sock in ready:
                return sock.recv()

    def _handshake_failed(self, ep, ev):
        zmq = self._zmq
        if self._keys and ev == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return ("the coordinator at %s refused this client's CURVE key %s (copy the .key "
                    "file beside curve_secret %s into the coordinator's --curve-allow directory)"
                    % (ep, self._keys[0].decode("ascii", "replace"), self.curve_secret))
        if self._keys:
            return ("the CURVE handshake with the coordinator at %s failed (check that "
                    "curve_server %s is the coordinator's public certificate and that the "
                    "coordinator runs with --curve-secret)" % (ep, self.curve_server))
        return ("the coordinator at %s requires CURVE authentication (set curve_secret= to your "
                "NAME.key_secret from `cgq keygen` and curve_server= to the coordinator's public "
                ".key, or CGQ_CURVE_SECRET and CGQ_CURVE_SERVER)" % ep)
