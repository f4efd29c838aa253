#!/usr/bin/env python3
"""cgq on Slurm: a real single-host Slurm (Debian's slurm-wlm and munge:
munged, slurmctld and slurmd started by this test, in the foreground, with a
generated slurm.conf on loopback ports of its own), a real Redis and
coordinator, and workers that only Slurm starts, from
orchestration/slurm/cgq-worker.sbatch, submitted by `cgq scale slurm`.

- The launcher starts workers while trials wait, never more than
  --max-workers at once, says why for each, and the job runs through them;
  each trial runs exactly once; once the queue is empty the workers leave by
  themselves (--idle) and nothing more is submitted.
- `scancel` of a worker job mid-trial: its trial goes back to the queue and
  runs again elsewhere (a new worker the launcher submits), every trial
  succeeds once, none is counted twice.
- A job whose trials need a GPU no partition has is reported unschedulable,
  once, and nothing is submitted for it.
- The launcher killed -9 and restarted mid-job, then slurmctld stopped and
  started again: never more than --max-workers, the launcher stays up, every
  trial runs once.

Not root, or no slurm-wlm/munge: skipped with the reason (exit 77)."""

import os
import re
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import CgqTestCase, Proc, binary, free_port, main, tail  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "orchestration", "slurm", "cgq-worker.sbatch")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "sinfo", "scancel")


def _sbin(name):
    for d in ("/usr/sbin", "/usr/bin", "/sbin"):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return shutil.which(name)


class SlurmTest(CgqTestCase):
    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest("the Slurm test runs slurmctld and slurmd as root (the tests' CI user)")
        missing = [n for n in DAEMONS + CLIENTS if not _sbin(n)]
        if missing:
            self.skipTest("needs slurm-wlm and munge (scripts/bootstrap): no %s" % ", ".join(missing))
        self.start_slurm()

    # -- a private Slurm

    def start_slurm(self):
        c = self.cluster
        d = os.path.join(self.tmp, "slurm")
        for sub in ("munge", "state", "spool"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        os.chmod(os.path.join(d, "munge"), 0o700)
        key = os.path.join(d, "munge", "key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        sock = os.path.join(d, "munge", "sock")
        munged = Proc("munged", [_sbin("munged"), "-F", "--force", "--key-file", key,
                                 "--socket", sock, "--pid-file", os.path.join(d, "munge", "pid"),
                                 "--seed-file", os.path.join(d, "munge", "seed"),
                                 "--log-file", os.path.join(d, "munge", "log")], c.logdir)
        c.procs.append(munged)
        self.wait_path(sock, munged, "munged's socket")
        host = socket.gethostname().split(".")[0]
        self.conf = os.path.join(d, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write("""ClusterName=cgqtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={cport}
SlurmdPort={dport}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=2
KillWait=15
InactiveLimit=0
NodeName=cgqnode NodeAddr=127.0.0.1 NodeHostname={host} CPUs=4 RealMemory=2000 State=UNKNOWN
PartitionName=cpu Nodes=cgqnode Default=YES MaxTime=INFINITE State=UP
""".format(host=host, cport=free_port(), dport=free_port(), sock=sock, d=d))
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        ctld = Proc("slurmctld", [_sbin("slurmctld"), "-D", "-i", "-f", self.conf], c.logdir,
                    env=self.env)
        c.procs.append(ctld)
        slurmd = Proc("slurmd", [_sbin("slurmd"), "-D", "-N", "cgqnode", "-f", self.conf],
                      c.logdir, env=self.env)
        c.procs.append(slurmd)
        self.slurm_procs = [slurmd, ctld, munged]
        for p in self.slurm_procs:
            p.expect_exit = None
        # Slurm that cannot start here (a container without what slurmd
        # needs) is a skip with its logs; once it runs, everything counts.
        deadline = time.monotonic() + 60
        while self.sinfo_state() != "idle":
            dead = [p for p in self.slurm_procs if not p.alive()]
            if dead or time.monotonic() > deadline:
                why = "; ".join("%s: %s" % (p.name, tail(p.err_path, 600)) for p in
                                (dead or self.slurm_procs))
                self.stop_slurm()
                for p in self.slurm_procs:  # tearDown does not run after a skip in setUp
                    p.stop(5)
                self.skipTest("a single-host Slurm did not start here (%s)" % why)
            time.sleep(0.2)

    def tearDown(self):
        # The launcher first (it would submit more), then every job gone, so
        # no slurmstepd or worker outlives the test; then the daemons.
        if getattr(self, "scale", None) is not None:
            problem = self.scale.stop()
            if problem:
                self.fail(problem)
        if getattr(self, "slurm_procs", None):
            self.stop_slurm()
        super().tearDown()

    def slurm_ok(self):
        for p in self.slurm_procs:
            if not p.alive():
                raise AssertionError("%s exited; its log:\n%s" % (p.name, tail(p.err_path)))
        return True

    def wait_path(self, path, proc, what):
        deadline = time.monotonic() + 20
        while not os.path.exists(path):
            if not proc.alive() or time.monotonic() > deadline:
                raise AssertionError("%s did not appear; log:\n%s" % (what, tail(proc.err_path)))
            time.sleep(0.05)

    def slurm(self, *argv, check=True):
        r = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=30)
        if check and r.returncode != 0:
            raise AssertionError("%s: exit %d: %s" % (" ".join(argv), r.returncode, r.stderr))
        return r.stdout

    def sinfo_state(self):
        return self.slurm("sinfo", "-h", "-o", "%T", check=False).strip()

    def our_jobs(self):
        """Slurm jobs named cgq-worker: {id: state}."""
        out = self.slurm("squeue", "-h", "-n", "cgq-worker", "-o", "%i %T")
        return dict(line.split() for line in out.splitlines() if line.strip())

    def stop_slurm(self):
        # Every job gone first, so no slurmstepd or worker outlives the test.
        self.slurm("scancel", "--full", "-n", "cgq-worker", check=False)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            try:
                if not self.our_jobs():
                    break
            except (AssertionError, subprocess.TimeoutExpired):
                break
            time.sleep(0.3)
        time.sleep(1)  # slurmstepd ends after the job is gone from squeue

    # -- cgq

    def start_scale(self, *extra):
        c = self.cluster
        env = c.cli_env(SLURM_CONF=self.conf, CGQ_WORKER=binary("cgq-worker"))
        argv = [binary("cgq"), "scale", "slurm", "--nodes", c.nodes_ep, "--script", SCRIPT,
                "--interval", "500ms"] + list(extra)
        p = Proc("scale", argv, c.logdir, env=env, cwd=self.tmp)
        self.scale = p
        return p

    def scale_log(self, p):
        with open(p.out_path) as f:
            return f.read()

    def test_launcher_serves_the_queue_then_idles_out(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        j = c.submit(c.write_counted_job("slurm", 6, 1.5))
        scale = self.start_scale("--max-workers", "3", "--idle", "3s")
        most = 0
        deadline = time.monotonic() + 90
        while c.job(j).get("state") != "finished":
            self.assertLess(time.monotonic(), deadline, "job %d: %s\nscale:\n%s" % (
                j, c.job(j), self.scale_log(scale)))
            self.slurm_ok()
            most = max(most, len(self.our_jobs()))
            time.sleep(0.2)
        job = c.job(j)
        self.assertEqual(job.get("succeeded"), "6", job)
        runs = c.counted_runs()
        self.assertEqual(runs, [(t, 1) for t in range(6)], "each trial ran exactly once")
        nodes = {h.get("node") for h in c.trials(j).values()}
        self.assertTrue(all(n and n.startswith("slurm-") for n in nodes),
                        "only Slurm's workers ran trials: %s" % nodes)
        self.assertLessEqual(most, 3, "never more than --max-workers worker jobs")
        log = self.scale_log(scale)
        subs = re.findall(r"submitted Slurm job (\d+) on cpu .*: job %d: (\d+) trial\(s\) waiting"
                          % j, log)
        self.assertTrue(1 <= len(subs) <= 3, "1 to 3 submissions, each with its reason:\n" + log)
        # Idle workers leave by themselves; nothing new is submitted.
        c.wait_for(lambda: not self.our_jobs(), 40, "the idle workers to exit (--idle 3s)")
        time.sleep(1.5)
        self.assertEqual(len(re.findall(r"submitted Slurm job", self.scale_log(scale))),
                         len(subs), "nothing submitted once the queue was empty")
        out = os.path.join(self.tmp, "cgq-worker-%s.out" % subs[0][0])
        self.assertIn("--idle-exit", open(out).read(), "the worker said why it left")

    def test_scancel_mid_trial_runs_it_again_once(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        j = c.submit(c.write_counted_job("cancelled", 4, 4))
        scale = self.start_scale("--max-workers", "2", "--idle", "3s")
        running = c.wait_value(
            lambda: {t: h for t, h in c.trials(j).items() if h.get("state") == "running"},
            lambda ts: len(ts) >= 1, 60, "a trial to run on a Slurm worker")
        t, h = sorted(running.items())[0]
        m = re.match(r"slurm-(\d+)-", h["node"])
        self.assertTrue(m, h)
        self.slurm("scancel", m.group(1))
        job = c.wait_job(j, 120)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual(job.get("succeeded"), "4", job)
        self.assertIn(job.get("failed", "0"), ("0", ""), job)
        trials = c.trials(j)
        self.assertEqual(trials[t].get("state"), "succeeded", trials[t])
        self.assertNotEqual(trials[t].get("node"), h["node"], "ran again on another worker")
        runs = c.counted_runs()
        self.assertEqual(sorted({r[0] for r in runs}), [0, 1, 2, 3])
        self.assertIn((t, 2), runs, "the cancelled trial ran again: %s" % runs)
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:leaderboard" % j), 4,
                         "each trial counted once")
        self.assertIn("submitted Slurm job", self.scale_log(scale))

    def test_broken_worker_script_backs_off(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.submit(c.write_counted_job("broken", 3, 0.1))
        broken = c.write_file("broken.sbatch", "#!/bin/sh\necho no worker here >&2\nexit 1\n",
                              0o755)
        scale = self.start_scale("--max-workers", "2", "--script", broken)
        c.wait_for(lambda: "no submission for" in self.scale_log(scale), 60,
                   "the launcher to back off after failed starts")
        log = self.scale_log(scale)
        self.assertGreaterEqual(log.count("ended before its worker connected"), 3, log)
        n = log.count("submitted Slurm job")
        time.sleep(2.5)
        self.assertEqual(self.scale_log(scale).count("submitted Slurm job"), n,
                         "no submission while backing off:\n" + self.scale_log(scale))
        self.assertLessEqual(n, 6, "a bounded number of tries:\n" + log)

    def test_gpu_no_partition_has_is_unschedulable(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        spec = c.write_file("gpu.yaml", """name: gpu
space:
  i: {grid: [0, 1, 2]}
trial:
  command: "true"
  resources: {cpu: 1, gpu: 1}
""")
        j = c.submit(spec)
        env = c.cli_env(SLURM_CONF=self.conf)
        for _ in range(2):
            r = c.cgq("scale", "slurm", "--nodes", c.nodes_ep, "--script", SCRIPT, "--once",
                      env=env, cwd=self.tmp)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"unschedulable: job %d needs 1 cpu, 1 gpu.*cpu \(4 cpu, "
                             r"0 gpu" % j)
            self.assertNotIn("submitted Slurm job", r.stdout)
        self.assertEqual(self.our_jobs(), {}, "nothing submitted for it")
        # A bad partition name and a missing endpoint are clear errors.
        r = c.cgq("scale", "slurm", "--nodes", c.nodes_ep, "--script", SCRIPT, "--once",
                  "--partition", "nosuch", env=env, cwd=self.tmp)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("--partition nosuch: sinfo lists no such partition", r.stderr)
        r = c.cgq("scale", "slurm", "--once", env=dict(env, CGQ_COORDINATOR_NODES=""),
                  cwd=self.tmp)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--nodes", r.stderr)

    def test_launcher_and_controller_restarted_mid_job(self):
        # The launcher keeps no state of its own (squeue and Redis are read
        # each round): killed -9 and started again it counts the worker jobs
        # already running and stays within --max-workers. slurmctld gone for
        # a while: the launcher says so each round and stays up; the running
        # workers go on; with slurmctld back the job finishes, each trial once.
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        n = 8
        j = c.submit(c.write_counted_job("restarts", n, 1.5))
        first = self.start_scale("--max-workers", "2", "--idle", "3s")
        c.wait_for(lambda: len(self.our_jobs()) == 2, 60, "two worker jobs")
        first.kill9()
        first.stop()  # (closes its log files)
        self.scale = self.start_scale("--max-workers", "2", "--idle", "3s")
        most = 0
        for _ in range(10):  # ~3 s of its rounds (--interval 500ms)
            most = max(most, len(self.our_jobs()))
            time.sleep(0.3)
        self.assertLessEqual(most, 2, "the restarted launcher stayed within --max-workers")

        ctld = next(p for p in self.slurm_procs if p.name == "slurmctld")
        self.assertIsNone(ctld.stop(10))
        time.sleep(3)
        self.assertTrue(self.scale.alive(), "the launcher exited without slurmctld:\n" +
                        tail(self.scale.err_path))
        back = Proc("slurmctld2", ctld.popen.args, c.logdir, env=self.env)
        back.expect_exit = None
        c.procs.append(back)
        self.slurm_procs[self.slurm_procs.index(ctld)] = back
        c.procs.remove(ctld)

        deadline = time.monotonic() + 120
        while c.job(j).get("state") != "finished":
            self.assertLess(time.monotonic(), deadline, "job %d: %s\nscale:\n%s" % (
                j, c.job(j), tail(self.scale.err_path)))
            self.assertTrue(self.scale.alive(), "the launcher exited")
            try:
                most = max(most, len(self.our_jobs()))
            except AssertionError:
                pass  # slurmctld still starting
            time.sleep(0.3)
        self.assertLessEqual(most, 2, "never more than --max-workers worker jobs")
        self.assert_exactly_once(j, n, timeout=10)


if __name__ == "__main__":
    main()
