#!/usr/bin/env python3
"""Compares two loom-run training runs: their losses and trained state.

    compare_training_runs.py METRICS_A WEIGHTS_A METRICS_B WEIGHTS_B [--rtol R | --exact] [--exclude REGEX]

METRICS_* are --metrics files (one JSON object per step), WEIGHTS_* are
--save-weights folders (one .npy file per state weight). Both runs must have
the same steps and the same state weights. With --rtol each loss must agree
within R relative, and each weight within R relative to its largest
magnitude (the runs sum in different orders); with --exact every loss and
every weight's bytes must be equal. --exclude leaves out the state weights
whose whole name (without .npy) REGEX matches (repeatable): a weight whose
gradient is rounding noise (GPT's attention key bias, training.md) drifts
apart under AdamW whatever the tolerance. Prints one line saying so, or
what differs; exits 1 on a difference.
"""
import argparse
import json
import os
import re
import sys

import numpy as np


def losses(path):
    with open(path) as f:
        return [(row["step"], row["loss"]) for row in map(json.loads, f)]


def weights(folder):
    return {name: np.load(os.path.join(folder, name))
            for name in sorted(os.listdir(folder)) if name.endswith(".npy")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics_a")
    parser.add_argument("weights_a")
    parser.add_argument("metrics_b")
    parser.add_argument("weights_b")
    parser.add_argument("--rtol", type=float, default=1e-6)
    parser.add_argument("--exact", action="store_true")
    parser.add_argument("--exclude", action="append", default=[])
    args = parser.parse_args()

    problems = []
    loss_a, loss_b = losses(args.metrics_a), losses(args.metrics_b)
    if [s for s, _ in loss_a] != [s for s, _ in loss_b]:
        problems.append("steps differ: %s vs %s" %
                        ([s for s, _ in loss_a], [s for s, _ in loss_b]))
    for (step, a), (_, b) in zip(loss_a, loss_b):
        bad = a != b if args.exact else abs(a - b) > args.rtol * abs(a)
        if bad:
            problems.append("step %d: loss %.9g vs %.9g" % (step, a, b))

    state_a, state_b = weights(args.weights_a), weights(args.weights_b)
    for state in (state_a, state_b):
        for name in list(state):
            if any(re.fullmatch(pattern, name[:-len(".npy")])
                   for pattern in args.exclude):
                del state[name]
    if sorted(state_a) != sorted(state_b):
        problems.append("state weights differ: %s vs %s" %
                        (sorted(state_a), sorted(state_b)))
    for name in sorted(set(state_a) & set(state_b)):
        a, b = state_a[name], state_b[name]
        if a.shape != b.shape or a.dtype != b.dtype:
            problems.append("%s: %s%s vs %s%s" %
                            (name, a.dtype, a.shape, b.dtype, b.shape))
            continue
        if args.exact:
            if a.tobytes() != b.tobytes():
                problems.append("%s: different bytes" % name)
            continue
        scale = max(float(np.max(np.abs(a))), 1e-30) if a.size else 1.0
        error = float(np.max(np.abs(a.astype(np.float64) - b))) / scale \
            if a.size else 0.0
        if not error <= args.rtol:
            problems.append("%s: relative difference %.3g" % (name, error))

    if problems:
        print("\n".join(problems))
        return 1
    print("%d losses and %d state weights %s" %
          (len(loss_a), len(state_a),
           "identical" if args.exact else "agree within %g" % args.rtol))
    return 0


if __name__ == "__main__":
    sys.exit(main())
