#!/usr/bin/env python3
"""Multi-objective early stopping: asha on a job with objectives
[loss min, lat min] and no early_stop.metric judges each trial's vector at
each rung (coordinator/early_stop.h): a trial goes on when no vector
recorded at the rung dominates its own, or when it is in the top
1/reduction of one objective; else it stops.

Four trials one at a time, each reporting {"epoch": e, "loss": final +
1.5/e, "lat": its latency} for e = 1..27, rungs 1, 3, 9:
  0: loss 0.0, lat 10  the first at every rung: goes on to the end
  1: loss 0.5, lat 20  dominated by 0 at rung 1: stops there
  2: loss 0.8, lat 2   worse loss than 0 and 1 but the best latency:
                       non-dominated, goes on to the end
  3: loss 0.3, lat 15  dominated by 0 at rung 1, 2nd by loss, 3rd by lat of
                       4 (only the top 1 of either goes on): stops
The coordinator is killed with SIGKILL while trial 2 runs past rung 9 and
restarted: trial 3, alone at rung 1 after the restart but for the records
kept in Redis ("TRIAL:LOSS:LAT" members), is still stopped by them.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import CgqTestCase, endpoint_port, main, metrics_of  # noqa: E402

CURVE = r'''
import json, os, sys, time
q = int(os.environ["CGQ_PARAM_Q"])
final, lat = FINALS[q], LATS[q]
for e in range(1, 28):
    time.sleep(float(sys.argv[1]))
    os.write(3, (json.dumps({"epoch": e, "loss": final + 1.5 / e, "lat": lat}) + "\n").encode())
'''

SPEC = '''name: asha-multi
space:
  q: {grid: [0, 1, 2, 3]}
search: {algorithm: grid, concurrency: 1}
objectives: [{metric: loss, mode: min}, {metric: lat, mode: min}]
early_stop: {algorithm: asha, attribute: epoch, grace: 1, reduction: 3, max: 27}
trial:
  command: python3 {spec_dir}/curve.py 0.08
  resources: {cpu: 1}
'''

FINALS = [0.0, 0.5, 0.8, 0.3]
LATS = [10, 20, 2, 15]


class AshaMultiTest(CgqTestCase):
    def test_dominated_stops_non_dominated_goes_on_across_a_kill(self):
        c = self.start_default(workers=(("w1", 1),))
        c.write_file("curve.py", CURVE.replace("FINALS", repr(FINALS)).replace("LATS", repr(LATS)))
        j = c.submit(c.write_file("asha.yaml", SPEC))
        # Trial 2 (the second to reach rung 9) recorded there: kill, restart.
        c.wait_for(lambda: c.redis.cmd("ZCARD", "cgq:job:{%d}:rung:9" % j) == 2, 60,
                   "trial 2 to reach rung 9")
        c.coordinator.kill9()
        c.start_coordinator(extra=("--bind", "tcp://127.0.0.1:%d" % endpoint_port(c.nodes_ep),
                                   "--control", "tcp://127.0.0.1:%d" % endpoint_port(c.control_ep)))
        job = c.wait_job(j, 90)
        self.assertEqual(job.get("state"), "finished", job)
        self.assertEqual((job.get("succeeded"), job.get("stopped")), ("2", "2"), job)
        trials = c.trials(j)
        ev = c.events(j)

        def detail(t):
            d = [e["detail"] for e in ev if e.get("type") == "trial.early_stopped"
                 and e.get("trial") == str(t)]
            return d

        for t in (0, 2):
            self.assertEqual(trials[t].get("state"), "succeeded", trials[t])
            self.assertEqual(metrics_of(trials[t]).get("epoch"), 27, trials[t])
            self.assertEqual(detail(t), [], "trial %d was not stopped" % t)
        self.assertEqual(trials[2].get("attempt"), "1", "adopted, not re-run: %s" % trials[2])
        for t, of, ranks in ((1, 2, "2, 2"), (3, 4, "2, 3")):
            self.assertEqual(trials[t].get("state"), "stopped", trials[t])
            self.assertEqual(metrics_of(trials[t]).get("epoch"), 1, trials[t])
            d = detail(t)
            self.assertEqual(len(d), 1, d)
            self.assertRegex(d[0], r"^asha: at rung epoch=1 its \(loss \S+, lat %d\) is dominated "
                             r"by 1 of %d recorded there and ranks %s by objective; only the "
                             r"non-dominated and the top 1 \(1/3\) by some objective go on$"
                             % (LATS[t], of, ranks))
        # The vectors are kept in Redis, each once per rung.
        members = c.redis.cmd("ZRANGE", "cgq:job:{%d}:rung:1" % j, 0, -1)
        self.assertEqual(sorted(m.split(":")[0] for m in members), ["0", "1", "2", "3"], members)
        lat_of = {m.split(":")[0]: float(m.split(":")[2]) for m in members}
        self.assertEqual(lat_of, {"0": 10, "1": 20, "2": 2, "3": 15}, members)
        self.assertEqual(c.redis.cmd("ZCARD", "cgq:job:{%d}:rung:9" % j), 2)


if __name__ == "__main__":
    main()
