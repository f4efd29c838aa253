#!/usr/bin/env python3
"""A real HTTP checkpoint store for the tests and bench/checkpoint.py: PUT,
GET, HEAD and DELETE of files below a directory, on a free loopback port
(Python's standard library only: http.server's ThreadingHTTPServer).

Switches, set on the object while it runs (or as flags when run as a
program), for the faults a store can have:

- full: every PUT is answered 507 Insufficient Storage (its body read first);
- drop: the next `drop` requests (-1: all) have their connection closed
  without an answer;
- corrupt: a GET of a path ending in this suffix gets one byte flipped;
- slow_s: every answer waits this long first;
- token: requests without "Authorization: Bearer TOKEN" get 401;
- tls=(cert, key): https (url then names localhost).

Every request is logged in `requests` as (method, path, status, auth) — auth
is whether the right token came, never the token.

    python3 tests/support/http_store.py --dir /tmp/store [--port 0] [--token T]
prints "http://127.0.0.1:PORT" on its first line and serves until killed.
"""

import argparse
import os
import shutil
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet; the store keeps its own log
        pass

    def _path(self):
        p = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        parts = [x for x in p.split("/") if x]
        if any(x in (".", "..") for x in parts):
            return None
        return os.path.join(self.server.store.root, *parts)

    def _gate(self):
        """Common start of every request: faults, token. False: answered."""
        st = self.server.store
        with st.lock:
            drop = st.drop != 0
            if st.drop > 0:
                st.drop -= 1
        if st.slow_s:
            time.sleep(st.slow_s)
        if drop:
            st.log(self.command, self.path, 0, None)
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass
            return False
        auth = None
        if st.token is not None:
            auth = self.headers.get("Authorization") == "Bearer " + st.token
            if not auth:
                self._answer(401, b"no or a wrong token\n", auth)
                return False
        self.auth = auth
        return True

    def _answer(self, code, body=b"", auth=None, length=None):
        self.server.store.log(self.command, self.path, code, auth)
        self.send_response(code)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        chunks = []
        while n > 0:
            b = self.rfile.read(min(n, 1 << 20))
            if not b:
                break
            chunks.append(b)
            n -= len(b)
        return chunks

    def do_PUT(self):
        if not self._gate():
            return
        st = self.server.store
        path = self._path()
        if st.full:
            self._read_body()
            self._answer(507, b"the store is full\n", self.auth)
            return
        if path is None:
            self._read_body()
            self._answer(400, b"bad path\n", self.auth)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = "%s.put-%d" % (path, threading.get_ident())
        with open(tmp, "wb") as f:
            for b in self._read_body():
                f.write(b)
        os.replace(tmp, path)
        self._answer(201, b"", self.auth)

    def _get(self):
        if not self._gate():
            return
        st = self.server.store
        path = self._path()
        if path is None or not os.path.isfile(path):
            self._answer(404, b"not found\n", self.auth)
            return
        with open(path, "rb") as f:
            data = f.read()
        if st.corrupt and self.path.endswith(st.corrupt) and data:
            data = bytes([data[0] ^ 0x01]) + data[1:]
        self._answer(200, data, self.auth)

    def do_GET(self):
        self._get()

    def do_HEAD(self):
        self._get()

    def do_DELETE(self):
        if not self._gate():
            return
        st = self.server.store
        path = self._path()
        if path is None or not os.path.exists(path):
            self._answer(404, b"", self.auth)
            return
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        # Empty directories above it go too (the store has no directories).
        d = os.path.dirname(path)
        while d != st.root and d.startswith(st.root):
            try:
                os.rmdir(d)
            except OSError:
                break
            d = os.path.dirname(d)
        self._answer(204, b"", self.auth)


class HttpStore:
    def __init__(self, root, port=0, token=None, tls=None):
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)
        self.full = False
        self.drop = 0
        self.corrupt = None
        self.slow_s = 0.0
        self.token = token
        self.lock = threading.Lock()
        self.requests = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.store = self
        self.port = self.httpd.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        if tls:  # (certificate file, key file): https
            import ssl
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            self.url = "https://localhost:%d" % self.port
        self.thread = None

    def log(self, method, path, status, auth):
        with self.lock:
            self.requests.append((method, path, status, auth))

    def start(self):
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.thread:
            self.thread.join(5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--token")
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--slow", type=float, default=0.0)
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve https")
    a = ap.parse_args()
    st = HttpStore(a.dir, a.port, a.token, a.tls)
    st.full, st.slow_s = a.full, a.slow
    print(st.url, flush=True)
    try:
        st.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
