#!/usr/bin/env python3
"""Writes a loom-run training run as a reference directory for compare_training.py.

    run_as_reference.py METRICS.jsonl WEIGHTS_DIR OUT_DIR [--exclude REGEX]

METRICS.jsonl is a `loom-run --metrics` file, WEIGHTS_DIR a `--save-weights`
folder of the same run. Writes OUT_DIR/losses.json (the loss of every step,
in step order) and OUT_DIR/NAME.npy for every trained parameter of
WEIGHTS_DIR (every NAME.npy there but the optimizer state, optimizer.*),
which is the layout train_reference.py gives PyTorch's run, so that
`compare_training.py OUT_DIR OTHER.jsonl OTHER.onnx --rtol R` holds another
run's losses and --save'd parameters to this one's. --exclude leaves out
the parameters whose whole name REGEX matches (repeatable). Prints how many
losses and parameters it wrote.
"""
import argparse
import json
import os
import re
import shutil
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("metrics")
    parser.add_argument("weights")
    parser.add_argument("out")
    parser.add_argument("--exclude", action="append", default=[])
    args = parser.parse_args()
    metrics, weights, out = args.metrics, args.weights, args.out
    with open(metrics) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    steps = [int(row["step"]) for row in rows]
    if steps != list(range(len(rows))):
        sys.exit("%s: steps %s are not 0..%d" % (metrics, steps,
                                                 len(rows) - 1))
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "losses.json"), "w") as f:
        json.dump([float(row["loss"]) for row in rows], f)
    names = sorted(name for name in os.listdir(weights)
                   if name.endswith(".npy") and
                   not name.startswith("optimizer.") and
                   not any(re.fullmatch(pattern, name[:-4])
                           for pattern in args.exclude))
    if not names:
        sys.exit("%s holds no parameters" % weights)
    for name in names:
        shutil.copyfile(os.path.join(weights, name), os.path.join(out, name))
    print("%d losses and %d parameters" % (len(rows), len(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
