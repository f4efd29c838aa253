#!/usr/bin/env python3
"""Redis with ACL users, as docs/security.md sets them up.

A real redis-server gets the two documented users: the coordinator's
(read-write on cgq:* keys) and a monitoring user (read-only). The coordinator
runs a job as its user; the monitoring user runs `cgq status` and
`cgq results` but cannot write: a coordinator started with it refuses to start
with Redis's NOPERM and what to fix, and a direct write is refused. A wrong
password fails cleanly. No password ever appears in a message.
"""

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, RedisError, binary, main, read_text  # noqa: E402

COORD_PW = "c0ord-s3cret"
MON_PW = "m0n-s3cret"


def doc_rules(user):
    """The ACL line for user from docs/security.md (so the doc is what is tested)."""
    doc = read_text(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "security.md"))
    m = re.search(r"^user %s (.+)$" % re.escape(user), doc, re.M)
    if not m:
        raise AssertionError("docs/security.md has no 'user %s ...' ACL line" % user)
    return m.group(1).split()


TRIAL = r'''
import json, os
p = json.loads(os.environ["CGQ_PARAMS"])
with os.fdopen(3, "w") as f:
    f.write(json.dumps({"score": p["x"] + 1}) + "\n")
'''

SPEC = '''name: acl
space:
  x: {grid: [1, 2, 3]}
search: {algorithm: grid}
objective: {metric: score, mode: max}
trial:
  command: python3 {spec_dir}/trial.py
  resources: {cpu: 1}
'''


class RedisAclTest(CgqTestCase):
    def setup_users(self):
        c = self.cluster
        c.start_redis()
        for user, pw in (("cgq-coordinator", COORD_PW), ("cgq-monitor", MON_PW)):
            rules = [r if not r.startswith(">") else ">" + pw for r in doc_rules(user)]
            c.redis.cmd("ACL", "SETUSER", user, "reset", *rules)
        self.coord_url = "redis://cgq-coordinator:%s@127.0.0.1:%d/0" % (COORD_PW, c.redis_port)
        self.mon_url = "redis://cgq-monitor:%s@127.0.0.1:%d/0" % (MON_PW, c.redis_port)
        return c

    def test_coordinator_user_and_read_only_user(self):
        c = self.setup_users()
        admin_url = c.redis_url
        c.redis_url = self.coord_url
        c.start_coordinator()
        c.start_worker("w1", cpus=2)
        c.write_file("trial.py", TRIAL)
        r = c.cgq("submit", c.write_file("acl.yaml", SPEC), env=c.cli_env(CGQ_REDIS=self.mon_url))
        self.assertEqual(r.returncode, 0, r.stderr)
        j = int(c.redis.cmd("ZRANGE", "cgq:jobs", 0, -1)[0])
        job = c.wait_job(j, 60)
        self.assertEqual((job.get("state"), job.get("succeeded")), ("finished", "3"), job)

        mon = c.cli_env(CGQ_REDIS=self.mon_url)
        r = c.cgq("status", env=mon)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("acl", r.stdout)
        r = c.cgq("status", j, env=mon)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = c.cgq("results", j, "--format", "csv", env=mon)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout.strip().splitlines()), 4, r.stdout)
        r = c.cgq("workers", env=mon)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("w1", r.stdout)

        # the monitoring user cannot write, neither directly nor as a coordinator
        from harness import Redis
        direct = Redis("127.0.0.1", c.redis_port)
        try:
            reply = direct.pipeline([("AUTH", "cgq-monitor", MON_PW),
                                     ("HSET", "cgq:job:{%d}" % j, "state", "forged")],
                                    raise_errors=False)
        finally:
            direct.close()
        self.assertEqual(reply[0], "OK")
        self.assertIsInstance(reply[1], RedisError)
        self.assertIn("NOPERM", str(reply[1]))
        r = subprocess.run([binary("cgq-coordinator"), "--redis", self.mon_url, "--bind",
                            "tcp://127.0.0.1:0", "--control", "tcp://127.0.0.1:0"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("NOPERM", r.stderr)
        self.assertIn("needs write access to cgq:* keys", r.stderr)
        self.assertNotIn(MON_PW, r.stderr, "the password is masked")
        self.assertEqual(c.job(j).get("state"), "finished", "nothing changed")

        # the coordinator's user cannot touch keys outside cgq:*
        direct = Redis("127.0.0.1", c.redis_port)
        try:
            reply = direct.pipeline([("AUTH", "cgq-coordinator", COORD_PW),
                                     ("SET", "other-app:key", "1"), ("FLUSHALL",)],
                                    raise_errors=False)
        finally:
            direct.close()
        self.assertIsInstance(reply[1], RedisError)
        self.assertIsInstance(reply[2], RedisError, "no @dangerous commands")

        # a wrong password: a clean failure that names the user, not the password
        bad = "redis://cgq-monitor:wrong-pw@127.0.0.1:%d/0" % c.redis_port
        r = c.cgq("status", env=c.cli_env(CGQ_REDIS=bad))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("authentication failed", r.stderr)
        self.assertNotIn("wrong-pw", r.stderr)
        c.redis_url = admin_url


if __name__ == "__main__":
    main()
