#!/usr/bin/env python3
"""make_seeds.py: write the binary seed inputs of the wire and coord fuzz targets.

    tests/fuzz/make_seeds.py      # rewrites corpus/wire/seed-* and corpus/coord/seed-*

Envelopes are encoded here by hand (field numbers of schemas/cgq.proto), so the
seeds need no protobuf package; a seed that drifts from the schema still
decodes as unknown fields and libFuzzer finds its way from there. Regression
inputs (crash-*, timeout-*, leak-*) are never touched.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def f_int(num, v):
    return varint(num << 3) + varint(v)


def f_dbl(num, v):
    return varint(num << 3 | 1) + struct.pack("<d", v)


def f_bytes(num, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(num << 3 | 2) + varint(len(b)) + b


def env(body_num, body, version=1):
    return f_int(1, version) + f_bytes(body_num, body)


def task(job, trial, attempt, stage=0):
    return f_int(1, job) + f_int(2, trial) + f_int(3, stage) + f_int(4, attempt)


def kv(k, v):
    return f_bytes(1, k) + f_bytes(2, v)


def resources(cpus=4.0, memory=1 << 30, gpus=1, devices=()):
    b = f_dbl(1, cpus) + f_int(2, memory)
    for i in range(gpus):
        b += f_bytes(3, f_int(1, i) + f_bytes(2, "gpu%d" % i) + f_int(3, 8 << 30))
    for dev_id, tags in devices:
        b += f_bytes(5, f_bytes(1, dev_id) + b"".join(f_bytes(2, kv(k, v)) for k, v in tags))
    return b


def result(t, status=0, metrics=None, error="", reports=0):
    b = f_bytes(1, t) + f_int(2, status)
    b += f_bytes(3, json.dumps(metrics if metrics is not None else {"acc": 0.9}))
    b += f_int(4, 0 if status == 0 else 1) + f_bytes(5, error) + f_dbl(6, 1.5)
    b += f_bytes(7, "tail\n") + f_int(8, reports) + f_bytes(9, "/w/job-1/trial-0/attempt-1")
    return b


def hello(node, kind=0, res=None, running=(), unacked=()):
    b = f_bytes(1, node) + f_int(2, kind) + f_bytes(3, res if res is not None else resources())
    for t in running:
        b += f_bytes(4, t)
    for r in unacked:
        b += f_bytes(5, r)
    return b + f_bytes(6, "host") + f_int(7, 4242) + f_bytes(8, "0.1.0") + f_int(9, 77)


def progress(t, report, seq=1):
    return f_bytes(1, t) + f_bytes(2, json.dumps(report)) + f_int(3, seq)


def heartbeat(running=()):
    return b"".join(f_bytes(1, t) for t in running) + f_int(2, 1)


# Envelope body field numbers.
HELLO, HEARTBEAT, ASSIGN, PROGRESS, RESULT, ACK, STOP, BYE = 10, 12, 13, 14, 15, 16, 17, 18
SUBMIT, CANCEL, PING, ENABLE = 30, 32, 34, 35

# The coordinator fuzz target's senders (fuzz_coord.c) and op flags.
W1, R1, W2, CLI = 0, 1, 2, 3
DISPATCH, TURN, LIVENESS = 4, 8, 0x30

J1 = [task(1, t, 1) for t in range(4)]  # job 1's trials, assigned to w1 by the prelude
D1 = task(2, 0, 1)                      # job 2's device trial, assigned to r1


def rec(sender, frame, flags=0):
    return bytes([sender | flags]) + struct.pack("<H", len(frame)) + frame


def coord_seeds():
    nan, inf = float("nan"), float("inf")
    ok = result(J1[0])
    return {
        "result-ok": rec(W1, env(RESULT, ok), TURN),
        "result-all": b"".join(rec(W1, env(RESULT, result(t, metrics={"acc": i / 4})), TURN)
                               for i, t in enumerate(J1)),
        "result-failed-retry": rec(W1, env(RESULT, result(J1[1], 1, error="exit 1")),
                                   DISPATCH | TURN),
        "result-unknown-task": rec(W1, env(RESULT, result(task(99, 5, 1)))),
        "result-stale-attempt": rec(W1, env(RESULT, result(task(1, 0, 7)))),
        "result-no-hello": rec(W2, env(RESULT, ok), TURN),
        "result-other-node": rec(R1, env(RESULT, ok), TURN),
        "result-bad-metrics": rec(W1, env(RESULT, f_bytes(1, J1[2]) + f_bytes(3, "{\"acc\": nan")),
                                  TURN),
        "result-device": rec(R1, env(RESULT, result(D1, metrics={"latency": 3.5})), TURN),
        "result-device-fail": b"".join(rec(R1, env(RESULT, result(D1, 1, error="board")),
                                           DISPATCH | TURN) for _ in range(4)),
        "hello-absurd": rec(W2, env(HELLO, hello("w2", res=resources(nan, 1 << 63, 40))),
                            DISPATCH)
        + rec(W2, env(HELLO, hello("w2", res=resources(inf, 0, 0))), DISPATCH)
        + rec(W2, env(HELLO, hello("w2", res=resources(1e9, 1 << 40, 0))), DISPATCH | TURN),
        "hello-running": rec(W1, env(HELLO, hello("w1", running=[J1[0], task(7, 7, 7)],
                                                  unacked=[result(J1[1]),
                                                           result(task(3, 3, 3))])),
                             DISPATCH | TURN),
        "hello-runner-again": rec(R1, env(HELLO, hello("r1", 1, resources(
            0, 0, 0, [("d1", [("device", "d1")]), ("d2", [("device", "x")])]), [D1])),
            DISPATCH | TURN),
        "hello-kind-swap": rec(W1, env(HELLO, hello("w1", 1)), DISPATCH | TURN),
        "progress": b"".join(rec(W1, env(PROGRESS, progress(t, {"epoch": e, "acc": e / 10 + i},
                                                            e)), TURN)
                             for e in (1, 2, 4, 8) for i, t in enumerate(J1)),
        "progress-unknown": rec(W1, env(PROGRESS, progress(task(9, 9, 9), {"epoch": 1})))
        + rec(W2, env(PROGRESS, progress(J1[0], {"epoch": 1, "acc": 1}))),
        "progress-junk": rec(W1, env(PROGRESS, f_bytes(1, J1[0]) + f_bytes(2, "[1, 2"))),
        "heartbeat": rec(W1, env(HEARTBEAT, heartbeat([J1[0], J1[1], task(5, 5, 5), D1])),
                         TURN),
        "heartbeat-unknown": rec(W2, env(HEARTBEAT, heartbeat([J1[0]]))),
        "bye": rec(W1, env(BYE, f_bytes(1, "shutting down")), DISPATCH | TURN),
        "liveness": rec(W1, env(HEARTBEAT, heartbeat()), LIVENESS | DISPATCH | TURN),
        "control": rec(CLI, env(PING, b""))
        + rec(CLI, env(CANCEL, f_int(1, 1)), TURN)
        + rec(CLI, env(CANCEL, f_int(1, 999)))
        + rec(CLI, env(ENABLE, f_bytes(1, "d1")), TURN)
        + rec(CLI, env(ENABLE, f_bytes(1, "")))
        + rec(CLI, env(HELLO, hello("cli"))),
        "submit": rec(CLI, env(SUBMIT, f_bytes(1, "space: {x: {choice: [1, 2]}}\n"
                                                 "search: {samples: 3}\ntrial: {kind: noop}\n")
                               + f_bytes(2, "s.yaml") + f_bytes(3, "/tmp")), DISPATCH | TURN),
        "submit-bad": rec(CLI, env(SUBMIT, f_bytes(1, "space: {x: 1\0trial"))),
        "unexpected": rec(W1, env(ASSIGN, f_bytes(1, J1[0])))
        + rec(W1, env(ACK, f_bytes(1, J1[0])))
        + rec(W1, env(STOP, f_bytes(1, J1[0]))),
        "bad-frames": rec(W1, b"\xff\xff\xff") + rec(W1, env(RESULT, ok, version=2))
        + rec(W1, b"") + rec(W1, f_int(1, 1)) + rec(W1, env(RESULT, ok)[:-3]),
    }


def wire_seeds():
    seeds = {}
    for name, data in coord_seeds().items():
        # The first frame of each conversation, alone.
        n = struct.unpack("<H", data[1:3])[0]
        seeds[name] = data[3:3 + n]
    seeds["assign"] = env(ASSIGN, f_bytes(1, J1[0]) + f_bytes(2, "command") + f_bytes(3, "{}")
                          + f_bytes(4, "sh") + f_bytes(4, "-c") + f_bytes(5, kv("A", "b"))
                          + f_bytes(6, b"\x00\x01") + f_dbl(7, 0.5) + f_int(10, 1000))
    seeds["ack"] = env(ACK, f_bytes(1, J1[0]) + f_bytes(1, J1[1]))
    seeds["welcome"] = env(11, f_int(1, 3) + f_int(2, 1000) + f_int(3, 4 << 20))
    seeds["reply"] = env(33, f_int(1, 2) + f_bytes(2, "no"))
    return seeds


def write(target, seeds):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("seed-"):
            os.remove(os.path.join(d, f))
    for name, data in seeds.items():
        with open(os.path.join(d, "seed-" + name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    write("coord", coord_seeds())
    write("wire", wire_seeds())
