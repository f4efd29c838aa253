"""cgq.errors: what the client raises. Standard library only.

Every message says what failed, with which value, and what to do, on one
line (a SpecError adds the offending line of the spec below it).
"""

import builtins
import re


class CgqError(Exception):
    """The base of every error the cgq client raises."""


class ConnectionError(CgqError, builtins.ConnectionError):
    """Redis or the coordinator cannot be reached, refused this client (a
    CURVE key, a Redis password), or did not answer in time. .endpoint is
    the address that was tried (passwords masked)."""

    def __init__(self, message, endpoint=None):
        super().__init__(message)
        self.endpoint = endpoint


class RequestError(CgqError):
    """The coordinator answered a request with a failure: .code 1 (it could
    not do it: Redis down, ...) or 2 (bad input), and its .message."""

    def __init__(self, message, code=1, reply=None):
        super().__init__(message)
        self.code = code
        self.reply = reply


# "FILE:LINE:COL: what is wrong", as the coordinator's spec parser says it.
_WHERE = re.compile(r"^(?P<path>.*?):(?P<line>\d+):(?P<col>\d+): (?P<reason>.*)\Z", re.S)
_LINE_COL = re.compile(r"^(?P<line>\d+):(?P<col>\d+): (?P<reason>.*)\Z", re.S)


class SpecError(RequestError, ValueError):
    """A spec that cgq refuses: the coordinator's parser (code 2) or this
    client's own checks before sending (a value that is not YAML, a spec over
    the size limit). .path is the spec's path ("<dict>" for a dict), .line and
    .col (1-based) where the coordinator's message gives them, else None,
    .reason the message without "FILE:LINE:COL: ", .text the spec as sent.
    str() is the message, then the spec's offending line and a caret."""

    def __init__(self, message, path=None, text=None, line=None, col=None, reason=None, code=2):
        super().__init__(message, code=code)
        self.message = message
        self.path = path
        self.text = text
        self.line = line
        self.col = col
        self.reason = reason if reason is not None else message
        if line is None and path and message.startswith(path + ":"):
            rest = message[len(path) + 1:]
            m = _LINE_COL.match(rest)
            if m:
                self.line, self.col = int(m.group("line")), int(m.group("col"))
                self.reason = m.group("reason")
            else:
                self.reason = rest.strip()
        elif line is None:
            m = _WHERE.match(message)
            if m:
                self.path = m.group("path")
                self.line, self.col = int(m.group("line")), int(m.group("col"))
                self.reason = m.group("reason")

    def __str__(self):
        out = self.message
        if self.text and self.line:
            lines = self.text.splitlines()
            if 0 < self.line <= len(lines):
                src = lines[self.line - 1]
                if len(src) > 200:  # a huge one-line value: show its start
                    src = src[:200] + "..."
                out += "\n    %s" % src
                if self.col and self.col <= len(src) + 1:
                    out += "\n    %s^" % (" " * (self.col - 1))
        return out


class NotFound(CgqError, KeyError):
    """No such job, trial or stage."""

    def __str__(self):  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class Timeout(CgqError, TimeoutError):
    """A wait ran out of time (Job.wait, Job.events)."""
