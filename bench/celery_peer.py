"""celery_peer: the peer queue of `make bench` (Celery 5.2 from Debian).

It runs under the interpreter that sees Debian's dist-packages (/usr/bin/python3),
which need not be the one running bench/run. Two roles:

  app module   `python3 -m celery -A celery_peer worker ...` imports this file;
               broker and result backend come from $CGQ_BENCH_BROKER and
               $CGQ_BENCH_BACKEND (redis:// URLs); the worker writes the file
               $CGQ_BENCH_READY_FILE once it consumes (bench/run waits for it);
  driver       `python3 celery_peer.py drive --kind noop|true --n N
               [--mode e2e|drain]` submits N tasks, waits for every result,
               checks them in the result backend, and prints one JSON line of
               figures for bench/run.

Modes: e2e times from the first apply_async until every result is in; drain
submits the N tasks first to a queue of their own (drain-SEED) that no worker
consumes yet, then times from the `add_consumer` broadcast (remote control:
every worker starts consuming that queue) until every result is in. The
workers are already up in both modes: a worker's start-up (a Python process
importing Celery, a second or two) is not part of either figure.

The tasks are the counterparts of cgq's bench trials:

  bench.noop   params {x: float} -> {x, score}: what cgq's `kind: noop` answers
               (the numeric params as metrics plus `score`, their sum);
  bench.true   runs /bin/true with subprocess -> {exit: 0}.
"""

import json
import os
import random
import subprocess
import sys
import time

from celery import Celery
from celery.signals import worker_ready

BROKER = os.environ.get("CGQ_BENCH_BROKER", "redis://127.0.0.1:6379/1")
BACKEND = os.environ.get("CGQ_BENCH_BACKEND", "redis://127.0.0.1:6379/2")

# Why these settings (bench/run prints them with the figures):
#  - task_acks_late: a message stays in the broker's unacked hash until its task
#    has finished, so a worker that dies mid-task gets it redelivered. cgq gives
#    the same guarantee (a lost node's trials go back to pending); Celery's
#    default (ack on receipt) would lose the task instead.
#  - worker_prefetch_multiplier 4 is Celery's default: a worker reserves up to
#    4 x --concurrency messages. cgq's coordinator hands a worker as many trials
#    as it has free slots, no more; this is the peer's stock behaviour, not a
#    tuning in either direction.
#  - results are stored (task_ignore_result off) and kept for a day (Celery's
#    default result_expires), as cgq keeps every trial hash.
#  - json both ways; no task events (cgq has no per-task event bus beyond the
#    events stream it writes to Redis anyway).
CONFIG = dict(
    broker_url=BROKER,
    result_backend=BACKEND,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_acks_late=True,
    worker_prefetch_multiplier=4,
    task_ignore_result=False,
    result_expires=86400,
    task_track_started=False,
    worker_send_task_events=False,
    broker_connection_retry_on_startup=True,
)
SHOWN = ("task_acks_late", "worker_prefetch_multiplier", "task_ignore_result", "result_expires",
         "task_track_started")

app = Celery("celery_peer")
app.conf.update(CONFIG)


@worker_ready.connect
def s_ready(**_kwargs):
    path = os.environ.get("CGQ_BENCH_READY_FILE")
    if path:
        with open(path, "w") as f:
            f.write("%d\n" % os.getpid())


@app.task(name="bench.noop")
def noop(**params):
    metrics = {k: v for k, v in params.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)}
    metrics["score"] = sum(metrics.values())
    return metrics


@app.task(name="bench.true")
def true(**_params):
    rc = subprocess.run(["/bin/true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode
    return {"exit": rc}


def drive(kind, n, timeout, seed, mode="e2e"):
    """Submit n tasks (apply_async in a loop, each with its own random x as cgq's
    random search draws one), wait for all of them (join_native: the Redis
    backend's pub/sub, the usual way to wait for many results), then read every
    result key back and count the correct ones. mode drain: see the module's
    docstring."""
    import redis
    from celery.result import ResultSet

    task = noop if kind == "noop" else true
    rnd = random.Random(seed)
    xs = [rnd.random() for _ in range(n)]
    back = redis.Redis.from_url(BACKEND)
    queue = "drain-%d" % seed
    t_enqueue = time.monotonic()
    if mode == "drain":
        # untimed: the tasks wait in a queue that no worker consumes yet
        results = [task.apply_async(kwargs={"x": x}, queue=queue) for x in xs]
        t0 = t_submitted = time.monotonic()
        app.control.add_consumer(queue, reply=False)
    else:
        t0 = t_enqueue
        results = [task.apply_async(kwargs={"x": x}) for x in xs]
        t_submitted = time.monotonic()
    error = None
    try:
        ResultSet(results).join_native(timeout=timeout, propagate=False)
    except Exception as e:  # a timeout or a lost connection: report it, do not hide it
        error = "%s: %s" % (type(e).__name__, e)
    wall = time.monotonic() - t0
    if mode == "drain":
        # untimed: the workers stop consuming the run's queue (replies awaited,
        # so the next run starts from the same state)
        app.control.cancel_consumer(queue, reply=True)

    keys = ["celery-task-meta-" + r.id for r in results]
    succeeded = 0
    bad = None
    for i in range(0, len(keys), 2000):
        for j, raw in enumerate(back.mget(keys[i:i + 2000])):
            meta = json.loads(raw) if raw is not None else {}
            res = meta.get("result")
            ok = meta.get("status") == "SUCCESS" and isinstance(res, dict)
            if ok and kind == "noop":
                ok = abs(res.get("score", -1) - xs[i + j]) < 1e-9
            elif ok:
                ok = res.get("exit") == 0
            if ok:
                succeeded += 1
            elif bad is None:
                bad = "task %s: %s" % (results[i + j].id, (raw or b"no result key")[:300]
                                         .decode("utf-8", "replace"))
    sample = keys[::max(1, len(keys) // 200)]
    sizes = [s for s in (back.memory_usage(k) for k in sample) if s]
    return {"kind": kind, "mode": mode, "n": n, "succeeded": succeeded, "wall": wall,
            "submit_s": t_submitted - t_enqueue, "tps": succeeded / wall if wall > 0 else 0.0,
            "key_bytes": sum(sizes) / len(sizes) if sizes else None,
            "done": succeeded == n and error is None,
            "error": error or (None if bad is None else "first bad result: %s" % bad)}


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="Celery peer driver for bench/run")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("drive", help="submit N tasks, wait, print figures as JSON")
    d.add_argument("--kind", choices=("noop", "true"), required=True)
    d.add_argument("--n", type=int, required=True)
    d.add_argument("--timeout", type=float, default=600)
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--mode", choices=("e2e", "drain"), default="e2e")
    sub.add_parser("about", help="versions and settings as JSON")
    a = ap.parse_args(argv)
    if a.cmd == "about":
        import celery
        import kombu
        import redis
        print(json.dumps({"celery": celery.__version__, "kombu": kombu.__version__,
                          "redis-py": redis.__version__,
                          "settings": {k: CONFIG[k] for k in SHOWN}}))
    else:
        print(json.dumps(drive(a.kind, a.n, a.timeout, a.seed, a.mode)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
