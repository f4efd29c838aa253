#!/usr/bin/env python3
"""Population Based Training (search: {algorithm: pbt}; docs/spec.md "pbt",
docs/architecture.md "Checkpoints"), with real trials written against
cgq.checkpoint():

- a toy where the good learning rate moves during training (it falls by
  x0.8 per epoch): a trial's score grows each epoch by how close its lr is
  to the optimum of that epoch. No fixed lr is good for long; PBT, which
  copies the best members' state and perturbs their lr, beats random search
  of at least the same budget (12 trials of 16 epochs against a population
  of 8; every epoch any process ran is counted; mean of the best over 5
  seeds). A fixed lr cannot score more than about 4.8 here. Every
  exploited trial's child resumes from its donor's checkpoint (its state
  is the donor's at that step) and its first report is the step after it,
  never epoch 1;
- every sealed checkpoint corrupted in the store as soon as it appears: a
  child cannot restore its donor's, and fails saying so; it never starts
  from epoch 1 with the donor's perturbed params;
- orchestration/examples/pbt under `cgq run`, as a user runs it;
- the coordinator killed (-9) twice in the middle of a PBT job: it still
  finishes, and the lineage is consistent: every exploited trial names its
  child, whose lineage names the trial it replaces and a donor whose
  checkpoint it resumed from; the population's size is kept.
"""

import json
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, CgqTestCase, binary, endpoint_port, main  # noqa: E402

CLIENTS = os.path.join(REPO, "clients", "python")

TRIAL = r'''
import json, math, os, sys, time
sys.path.insert(0, sys.argv[1])
import cgq

epochs, sleep_s, lr = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
trial = os.environ["CGQ_TRIAL_ID"]
ck = cgq.checkpoint_dir()
start = cgq.resume_step()
theta, at = 0.0, 0
sp = os.path.join(ck, "state.json")
if os.path.exists(sp):
    with open(sp) as f:
        st = json.load(f)
    theta, at = st["theta"], st["epoch"]
with open(os.path.join(os.environ["CGQ_SPEC_DIR"], "runs.jsonl"), "a") as f:
    f.write(json.dumps({"trial": int(trial), "attempt": int(os.environ["CGQ_ATTEMPT"]),
                        "resume": start, "at": at, "theta": theta, "lr": lr}) + "\n")
ran = 0
for epoch in range(at + 1, epochs + 1):
    time.sleep(sleep_s)
    opt = 0.1 * 0.8 ** (epoch - 1)
    theta += math.exp(-((math.log(lr) - math.log(opt)) / 0.6) ** 2)
    ran += 1
    with open(os.path.join(os.environ["CGQ_SPEC_DIR"], "epochs.jsonl"), "a") as f:
        f.write(json.dumps({"trial": int(trial), "epoch": epoch}) + "\n")
    cgq.report(epoch=epoch, acc=theta)
    with open(sp, "w") as f:
        json.dump({"epoch": epoch, "theta": theta}, f)
    cgq.checkpoint(epoch=epoch)
cgq.result(acc=theta, epoch=epochs)
'''

SPEC = '''name: %(name)s
space:
  lr: {loguniform: [0.0001, 1.0]}
search: %(search)s
objective: {metric: acc, mode: max}
trial:
  command: python3 {spec_dir}/toy.py %(clients)s %(epochs)d %(sleep)s {lr}
  resources: {cpu: 1}
  timeout: 2m
checkpoint: {store: '{spec_dir}/store'}
'''

EPOCHS = 16


def pbt_search(seed, population=8, interval=2):
    return ("{algorithm: pbt, population: %d, perturbation_interval: %d, seed: %d, "
            "hyperparam_mutations: [lr]}" % (population, interval, seed))


class PbtTest(CgqTestCase):
    def run_job(self, c, name, search, sleep="0.03", epochs=EPOCHS, wait=True):
        d = os.path.join(c.specdir, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "toy.py"), "w") as f:
            f.write(TRIAL)
        path = os.path.join(d, "spec.yaml")
        with open(path, "w") as f:
            f.write(SPEC % dict(name=name, search=search, clients=CLIENTS, epochs=epochs,
                                sleep=sleep))
        j = c.submit(path)
        if not wait:
            return j, d
        job = c.wait_job(j, 120)
        self.assertEqual(job.get("state"), "finished", job)
        return j, d

    def lines(self, d, name):
        p = os.path.join(d, name)
        if not os.path.exists(p):
            return []
        with open(p) as f:
            return [json.loads(x) for x in f if x.strip()]

    def check_lineage(self, c, j, d, population, check_reports=True):
        """Consistent lineage; returns the trials (id -> hash)."""
        trials = c.trials(j)
        exploited = {t: json.loads(h["exploited"]) for t, h in trials.items() if h.get("exploited")}
        children = {t: json.loads(h["lineage"]) for t, h in trials.items() if h.get("lineage")}
        self.assertEqual(len(trials), population + len(children), sorted(trials))
        self.assertEqual(sorted(children), list(range(population, population + len(children))))
        self.assertEqual(sorted(e["by"] for e in exploited.values()), sorted(children))
        runs = self.lines(d, "runs.jsonl")
        for t, e in exploited.items():
            h = trials[t]
            self.assertEqual(h.get("state"), "stopped", h)
            lin = children[e["by"]]
            self.assertEqual(lin["replaces"], t, (t, e, lin))
            self.assertEqual(lin["parent"], e["donor"], (t, e, lin))
            self.assertEqual(int(trials[e["by"]]["parent"]), e["donor"])
            self.assertNotIn(lin["parent"], (t, e["by"]))
            self.assertIn("lr", lin["changed"], lin)
            old, new = lin["changed"]["lr"]
            donor_lr = json.loads(trials[lin["parent"]]["params"])["lr"]
            self.assertAlmostEqual(old, donor_lr, places=9)
            self.assertAlmostEqual(new, json.loads(trials[e["by"]]["params"])["lr"], places=9)
        for t, lin in children.items():
            h = trials[t]
            self.assertIn(h.get("state"), ("succeeded", "stopped"), h)
            step = lin["step"]["epoch"]
            # Its first attempt resumed from the donor's checkpoint at that
            # step, with the donor's state, and reported from the step after.
            first = [r for r in runs if r["trial"] == t][0]
            self.assertEqual((first["resume"], first["at"]), (step, step), (t, first, lin))
            donor_theta = [r for r in self.lines(d, "runs.jsonl") if r["trial"] == lin["parent"]]
            self.assertTrue(donor_theta, lin)
            reps = [json.loads(e["r"]) for e in c.redis.xrange("cgq:job:{%d}:reports:%d" % (j, t))]
            # (Not after a coordinator kill: reports sent while it is down are lost.)
            if reps and check_reports:
                self.assertEqual(reps[0]["epoch"], step + 1, (t, reps[:2], lin))
        ev = [e for e in c.events(j) if e.get("type") == "trial.exploited"]
        self.assertEqual(sorted(int(e["trial"]) for e in ev), sorted(exploited), ev)
        for e in ev:
            self.assertIn("continues as trial %d" % exploited[int(e["trial"])]["by"], e["detail"])
        return trials

    def test_pbt_beats_random_search(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.start_worker("w1", cpus=8)
        best = {"pbt": [], "random": []}
        ran = {"pbt": 0, "random": 0}
        last_pbt = None
        for seed in (1, 2, 3, 4, 5):
            for kind in ("pbt", "random"):
                search = (pbt_search(seed) if kind == "pbt" else
                          "{algorithm: random, samples: 12, seed: %d}" % seed)
                j, d = self.run_job(c, "%s-%d" % (kind, seed), search)
                best[kind].append(float(c.job(j)["best_value"]))
                # Every epoch any trial process ran (an exploited one's too).
                ran[kind] += len(self.lines(d, "epochs.jsonl"))
                if kind == "pbt":
                    trials = self.check_lineage(c, j, d, 8)
                    self.assertGreater(len(trials), 8, "some trials were exploited")
                    last_pbt = j
        mean = {k: sum(v) / len(v) for k, v in best.items()}
        print("best acc per seed: %s; mean %s; epochs run %s" % (best, mean, ran))
        self.assertGreater(mean["pbt"], mean["random"] * 1.1, (best, mean))
        # At least the same budget for random search: PBT ran no more epochs (random: 12 x 16
        # per seed; PBT: 8 x 16 plus what each exploited trial ran past the step its child
        # resumed from, which grows with the exploits: 90 to 160 per seed seen).
        self.assertLessEqual(ran["pbt"], ran["random"], ran)
        # cgq results shows the lineage.
        r = c.cgq("results", str(last_pbt))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("lineage", r.stdout.splitlines()[0], r.stdout)
        self.assertRegex(r.stdout, r"\d+@\d+")
        self.assertIn("->", r.stdout)
        r = c.cgq("results", str(last_pbt), "--format", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        data = json.loads(r.stdout)
        self.assertTrue([t for t in data["trials"] if "lineage" in t], data)
        # The Python client's Trial has them too.
        env = dict(os.environ, PYTHONPATH=CLIENTS)
        code = ("import json, sys, cgq; c = cgq.Client(%r); "
                "ts = c.job(%d).trials(); "
                "print(json.dumps([[t.id, t.parent, t.lineage, t.exploited] for t in ts]))"
                % (c.redis_url, last_pbt))
        p = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = {r[0]: r for r in json.loads(p.stdout)}
        hashes = c.trials(last_pbt)
        for t, h in hashes.items():
            self.assertEqual(rows[t][1], int(h["parent"]) if h.get("parent") else None)
            self.assertEqual(rows[t][2], json.loads(h["lineage"]) if h.get("lineage") else None)
            self.assertEqual(rows[t][3], json.loads(h["exploited"]) if h.get("exploited") else None)

    def test_coordinator_kill9_keeps_lineage(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator(extra=("--durable-after", "200ms"))
        c.start_worker("w1", cpus=4)
        j, d = self.run_job(c, "pbt-kill", pbt_search(5, population=4, interval=2),
                            sleep="0.25", epochs=14, wait=False)
        nodes_port = endpoint_port(c.nodes_ep)
        control_port = endpoint_port(c.control_ep)
        for n in (1, 3):
            c.wait_value(lambda: [e for e in c.events(j) if e.get("type") == "trial.exploited"],
                         lambda ev: len(ev) >= n, 60, "%d exploit(s)" % n)
            time.sleep(0.1)
            c.coordinator.kill9()
            c.start_coordinator(extra=("--durable-after", "200ms", "--bind",
                                       "tcp://127.0.0.1:%d" % nodes_port, "--control",
                                       "tcp://127.0.0.1:%d" % control_port))
        job = c.wait_job(j, 120)
        self.assertEqual(job.get("state"), "finished", job)
        trials = self.check_lineage(c, j, d, 4, check_reports=False)
        for t, h in trials.items():
            self.assertIn(h.get("state"), ("succeeded", "stopped"), (t, h))
        # Every child's donor checkpoint was there when it started (none failed
        # to restore), and the store still has what the last acks named.
        for t, h in trials.items():
            self.assertFalse(h.get("error"), (t, h))

    def test_unrestorable_donor_checkpoint_fails_the_child(self):
        c = self.cluster
        c.start_redis()
        c.start_coordinator()
        c.start_worker("w1", cpus=4)
        search = pbt_search(3, population=4, interval=2)[:-1] + ", fail_fast: 0}"
        j, d = self.run_job(c, "pbt-corrupt", search, sleep="0.1", epochs=10, wait=False)
        store = os.path.join(d, "store")
        done = threading.Event()
        flipped = set()

        def corrupt():
            while not done.is_set():
                for root, dirs, files in os.walk(store):
                    base = os.path.basename(root)
                    if base.startswith("ckpt-") and not base.endswith(".tmp") and root not in flipped:
                        p = os.path.join(root, "files", "state.json")
                        try:
                            with open(p, "r+b") as f:
                                b = f.read(1)
                                f.seek(0)
                                f.write(b"[" if b != b"[" else b"{")
                            flipped.add(root)
                        except OSError:
                            pass
                time.sleep(0.005)

        th = threading.Thread(target=corrupt, daemon=True)
        th.start()
        try:
            job = c.wait_job(j, 120, states=("finished", "cancelled", "failed"))
        finally:
            done.set()
            th.join(5)
        self.assertEqual(job.get("state"), "finished", job)
        trials = c.trials(j)
        children = {t: h for t, h in trials.items() if h.get("lineage")}
        self.assertTrue(children, "some trial was exploited")
        started = {r["trial"] for r in self.lines(d, "runs.jsonl")}
        for t, h in children.items():
            self.assertEqual(h.get("state"), "failed", (t, h))
            self.assertIn("could not be restored, and it must not start afresh", h.get("error", ""))
            self.assertNotIn(t, started, "a child never starts without its donor's checkpoint")

    def test_example(self):
        work = os.path.join(self.tmp, "work")
        shutil.copytree(os.path.join(REPO, "orchestration", "examples", "pbt"),
                        os.path.join(work, "orchestration", "examples", "pbt"),
                        ignore=shutil.ignore_patterns("__pycache__", ".checkpoints"))
        shutil.copytree(CLIENTS, os.path.join(work, "clients", "python"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("CGQ_")}
        p = subprocess.run([binary("cgq"), "run", "orchestration/examples/pbt/tune.yaml",
                            "--format", "json"], cwd=work, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        doc = json.loads(p.stdout)
        self.assertEqual(doc["state"], "finished", doc)
        trials = doc["trials"]
        self.assertTrue([t for t in trials if t.get("lineage")], trials)
        self.assertTrue([t for t in trials if t.get("exploited")], trials)
        best = max(t["metrics"]["val_score"] for t in trials if t["state"] == "succeeded")
        self.assertGreater(best, 3.0, trials)


if __name__ == "__main__":
    main()
