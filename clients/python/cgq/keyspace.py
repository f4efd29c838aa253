"""cgq.keyspace: cgq's Redis names, for Python (standard library only).

The same names as common/keyspace.h, which the coordinator (the only writer)
writes through; docs/architecture.md ("Redis data model") describes them.
Every "cgq:" literal of the Python client is here.
"""

JOBS = "cgq:jobs"                # zset: job id, score = created
NODES = "cgq:nodes"              # set: node ids ever seen
DEVICES = "cgq:devices"          # set: device ids ever declared
EVENTS = "cgq:events"            # stream of every transition
COORDINATOR = "cgq:coordinator"  # hash: the running coordinator
LEADER = "cgq:leader"            # the leader lease: "EPOCH HOST:PID"
JOB_SEQ = "cgq:seq:job"

REPORT_FIELD = "r"               # the report stream's one field: the report's JSON
RUN_PREFIX = "run:"              # trial hash: a multi-stage trial's finished stage runs

TRIAL_STATES = ("pending", "running", "succeeded", "failed", "stopped", "cancelled",
                "unschedulable", "stale", "paused")
TRIAL_DONE = ("succeeded", "failed", "stopped", "cancelled")
JOB_STATES = ("running", "finished", "cancelled", "failed")
JOB_DONE = ("finished", "cancelled", "failed")
JOB_END_EVENTS = ("job.finished", "job.cancelled", "job.failed")


def job(j):
    return "cgq:job:{%d}" % j


def trial(j, t):
    return "cgq:job:{%d}:trial:%d" % (j, t)


def reports(j, t):
    return "cgq:job:{%d}:reports:%d" % (j, t)


def leaderboard(j):
    return "cgq:job:{%d}:leaderboard" % j


def active(j):
    return "cgq:job:{%d}:active" % j


def pareto(j):
    return "cgq:job:{%d}:pareto" % j


def suggestions(j):
    """list: an external job's points, in the order sent (trial i runs point i)"""
    return "cgq:job:{%d}:suggestions" % j


def node(node_id):
    return "cgq:node:" + node_id


def device(device_id):
    return "cgq:device:" + device_id
