#!/usr/bin/env python3
"""The committed predictor dataset carries its own ceiling: every graph's
latency in two passes (graph-label.csv.gz columns 3 and 4, measured by
measure.yaml with measure: {passes: 2}), and docs/predictor.md states how
well they agree. This recomputes that figure from the data (acc10: the share
of graphs whose second pass is within +-10 % of the first, as common/agree.c
and `cgq results --passes` count it; the median |difference|) and checks the
docs say the same, and that column 0 is the passes' mean. Reads files only."""

import gzip
import os
import re
import statistics
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "orchestration", "examples", "predictor", "data", "cpu-local")
DOC = os.path.join(ROOT, "docs", "predictor.md")


class DatasetCeilingTest(unittest.TestCase):
    def test_the_docs_state_the_passes_agreement(self):
        with gzip.open(os.path.join(DATA, "graph-label.csv.gz"), "rt") as f:
            rows = [[float(x) for x in line.split(",")] for line in f if line.strip()]
        self.assertGreaterEqual(len(rows), 1000)
        self.assertTrue(all(len(r) == 5 for r in rows),
                        "every graph has both passes (columns 3 and 4)")
        for r in rows:
            self.assertAlmostEqual(r[0], (r[3] + r[4]) / 2, delta=1e-9 * r[0])
        diffs = [abs(r[4] - r[3]) / r[3] for r in rows]
        within = sum(d <= 0.10 for d in diffs)
        acc10 = 100.0 * within / len(rows)
        median = 100.0 * statistics.median(diffs)
        with open(DOC) as f:
            doc = f.read()
        m = re.search(r"pass-to-pass acc10 \*\*([\d.]+) %\*\* \((\d+) of (\d+) graphs within "
                      r"±10 %; median \|difference\| ([\d.]+) %\)", doc)
        self.assertIsNotNone(m, "docs/predictor.md states the ceiling as 'pass-to-pass acc10 "
                                "**X %** (N of M graphs within ±10 %; median |difference| Y %)'")
        self.assertEqual((int(m.group(2)), int(m.group(3))), (within, len(rows)))
        self.assertAlmostEqual(float(m.group(1)), acc10, delta=0.05)
        self.assertAlmostEqual(float(m.group(4)), median, delta=0.05)


if __name__ == "__main__":
    unittest.main(verbosity=2)
