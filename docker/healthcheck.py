#!/usr/bin/python3
"""cgq-healthcheck: the image's HEALTHCHECK (docker/Dockerfile).

Healthy (exit 0) when a cgq daemon (cgq-coordinator, cgq-worker,
cgq-device-runner) runs in this container and, for a coordinator, its
control endpoint accepts a TCP connection on loopback. Unhealthy (exit 1)
otherwise, with one line saying why. A container running only the CLI has no
daemon and reports unhealthy; that is expected. A standby coordinator (its
/proc/PID/comm is cgq-standby while it waits for the lease) binds nothing
and is healthy while it runs.

It reads only /proc and the environment (CGQ_CONTROL, as the coordinator
does; a --control flag on the daemon's command line wins), so it needs
neither Redis credentials nor the network.
"""

import os
import socket
import sys

DAEMONS = ("cgq-coordinator", "cgq-worker", "cgq-device-runner")


def daemons():
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                argv = [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]
            with open("/proc/%s/stat" % name, "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argv and state != b"Z" and os.path.basename(argv[0]) in DAEMONS:
            found.append((int(name), argv))
    return found


def standing_by(pid):
    """A standby coordinator names itself cgq-standby (/proc/PID/comm) while it
    waits for the leader lease."""
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip() == "cgq-standby"
    except OSError:
        return False


def control_endpoint(argv):
    for i, a in enumerate(argv):
        if a == "--control" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--control="):
            return a.split("=", 1)[1]
    return os.environ.get("CGQ_CONTROL") or "tcp://*:7701"


def check_tcp(ep):
    """tcp://HOST:PORT accepts a connection; * and 0.0.0.0 mean loopback."""
    if not ep.startswith("tcp://"):
        return None  # ipc:// and the like: nothing to probe
    host, _, port = ep[len("tcp://"):].rpartition(":")
    if host in ("*", "0.0.0.0", ""):
        host = "127.0.0.1"
    elif host in ("[::]", "::"):
        host = "::1"
    host = host.strip("[]")
    if int(port) == 0:
        return None  # "any free port": the one it got is in its ready line, not here
    with socket.create_connection((host, int(port)), timeout=3):
        return None


def main():
    found = daemons()
    if not found:
        print("unhealthy: no cgq daemon (%s) runs in this container" % ", ".join(DAEMONS))
        return 1
    for pid, argv in found:
        if os.path.basename(argv[0]) == "cgq-coordinator":
            if standing_by(pid):
                continue  # a standby binds nothing until it takes the lease
            ep = control_endpoint(argv)
            try:
                check_tcp(ep)
            except (OSError, ValueError) as e:
                print("unhealthy: cgq-coordinator (pid %d) control endpoint %s: %s" % (pid, ep, e))
                return 1
    print("healthy: " + ", ".join("%s (pid %d)" % (os.path.basename(a[0]), p) for p, a in found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
