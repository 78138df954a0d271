#!/usr/bin/env python3
"""Trains an exported GPT under several layouts with and without activation
recompute and checks that each trains bit for bit like itself without it
and plans less memory on every rank.

    recompute_layouts.py LOOM_RUN EXPORT_DIR HALF_EXPORT_DIR WORK_DIR
        [--recompute MODE] [--flag FLAG ...]

EXPORT_DIR is train_reference.py's (model.onnx, input.npy, labels.npy)
exported for the batch of 4, HALF_EXPORT_DIR for microbatches of 2 rows
(--grad-accum 2). MODE is the recompute mode compared with none (full by
default); each --flag is added to every run (--unfused-attention, for
selective recompute). Prints one line per layout; exits 1 on a
difference or a peak that did not shrink.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

# (name, whether it runs microbatches of 2 rows, flags)
LAYOUTS = [
    ("1 rank", False, []),
    ("dp 2", False, ["--dp", "2", "--ranks", "2"]),
    ("tp 2, sequence parallel", False,
     ["--tp", "2", "--sequence-parallel", "--ranks", "2"]),
    ("pp 2, 1f1b, 2 microbatches", True,
     ["--pp", "2", "--microbatches", "2", "--ranks", "2"]),
    ("pp 2, zb-h1, 2 microbatches", True,
     ["--pp", "2", "--microbatches", "2", "--schedule", "zb-h1",
      "--ranks", "2"]),
    ("dp 2, ZeRO-3, 2 microbatches", True,
     ["--dp", "2", "--zero", "3", "--grad-accum", "2", "--ranks", "2"]),
]


def train(loom_run, export, work, tag, flags):
    out = os.path.join(work, tag)
    os.makedirs(out, exist_ok=True)
    cmd = [loom_run, os.path.join(export, "model.onnx"), "--train",
           "--input", "idx=" + os.path.join(export, "input.npy"),
           "--labels", os.path.join(export, "labels.npy"),
           "--batch-size", "4", "--steps", "10", "--optimizer", "adamw",
           "--lr", "1e-2", "--eps", "1e-5",
           "--metrics", os.path.join(out, "metrics.jsonl"),
           "--save-weights", os.path.join(out, "weights"),
           "--report-json", os.path.join(out, "report.json")] + flags
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{run.stdout}\n{run.stderr}")
    losses = [json.loads(line)["loss"]
              for line in open(os.path.join(out, "metrics.jsonl"))]
    folder = os.path.join(out, "weights")
    weights = {name: np.load(os.path.join(folder, name))
               for name in sorted(os.listdir(folder))}
    peaks = [r["planned_peak_bytes"] for r in
             json.load(open(os.path.join(out, "report.json")))["ranks"]]
    return losses, weights, peaks


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("loom_run")
    parser.add_argument("whole")
    parser.add_argument("half")
    parser.add_argument("work")
    parser.add_argument("--recompute", default="full")
    parser.add_argument("--flag", action="append", default=[])
    args = parser.parse_args()
    loom_run, whole, half, work = args.loom_run, args.whole, args.half, \
        args.work
    ok = True
    for index, (name, microbatched, flags) in enumerate(LAYOUTS):
        export = half if microbatched else whole
        flags = flags + args.flag
        kept = train(loom_run, export, work, f"{index}-none", flags)
        redone = train(loom_run, export, work, f"{index}-{args.recompute}",
                       flags + ["--recompute", args.recompute])
        problems = []
        if kept[0] != redone[0]:
            problems.append(f"losses differ: {kept[0]} vs {redone[0]}")
        if sorted(kept[1]) != sorted(redone[1]):
            problems.append("different state weights")
        for weight in kept[1]:
            if weight in redone[1] and \
                    kept[1][weight].tobytes() != redone[1][weight].tobytes():
                problems.append(f"{weight} differs")
        for rank, (before, after) in enumerate(zip(kept[2], redone[2])):
            if after >= before:
                problems.append(f"rank {rank}'s peak did not shrink: "
                                f"{before} -> {after} bytes")
        if problems:
            ok = False
            print(f"{name}: MISMATCH: " + "; ".join(problems[:5]))
        else:
            print(f"{name}: {len(kept[0])} losses and {len(kept[1])} state "
                  f"weights identical; peak per rank {max(kept[2])} -> "
                  f"{max(redone[2])} bytes")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
