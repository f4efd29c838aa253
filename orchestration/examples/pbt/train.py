#!/usr/bin/env python3
"""A stand-in training loop for the PBT example (tune.yaml).

It keeps its "weights" (one number) in cgq.checkpoint_dir() and announces a
checkpoint after every epoch with cgq.checkpoint(epoch=N). Started as a PBT
child, it finds its donor's checkpoint there and goes on from
cgq.resume_step() with its own (perturbed) lr. The best lr falls by x0.8 per
epoch, so a schedule beats any fixed lr.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                                "clients", "python"))
import cgq  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--lr", type=float, required=True)
ap.add_argument("--momentum", type=float, default=0.9)
ap.add_argument("--epochs", type=int, default=12)
a = ap.parse_args()

state_path = os.path.join(cgq.checkpoint_dir(), "state.json")
weights, start = 0.0, 0
if os.path.exists(state_path):  # a resumed attempt, or a PBT child
    with open(state_path) as f:
        st = json.load(f)
    weights, start = st["weights"], st["epoch"]

for epoch in range(start + 1, a.epochs + 1):
    time.sleep(0.05)
    best_lr = 0.1 * 0.8 ** (epoch - 1)
    fit = math.exp(-((math.log(a.lr) - math.log(best_lr)) / 0.6) ** 2)
    weights += fit * (0.5 + 0.5 * a.momentum)
    cgq.report(epoch=epoch, val_score=weights)
    with open(state_path, "w") as f:
        json.dump({"epoch": epoch, "weights": weights}, f)
    cgq.checkpoint(epoch=epoch)
cgq.result(val_score=weights, epoch=a.epochs)
