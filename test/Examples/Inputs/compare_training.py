#!/usr/bin/env python3
"""Compares a `loom-run --train` run with the PyTorch reference of train_reference.py.

    compare_training.py REF_DIR METRICS.jsonl TRAINED.onnx [--rtol 1e-4]
        [--weight-rtol X] [--late-rtol X --late-from STEP]

REF_DIR/losses.json (PyTorch's per-step losses) is compared with the "loss" of
every line of METRICS.jsonl (loom-run --metrics, one JSON object per step with
"step" counting from 0), and every REF_DIR/NAME.npy (a trained parameter) with
the initializer NAME of TRAINED.onnx (loom-run --save). The relative error is
|a - b| / |b| for a loss and max|a - b| / max|b| for a tensor (b: PyTorch).
Prints one line per loss and per parameter, "ok" or "MISMATCH", then
"all N losses and M weights within RTOL"; exits 1 on any mismatch, on a
missing step or parameter, or when the step counts differ. --weight-rtol
holds the weights to another tolerance than the losses (default: --rtol);
--late-rtol holds the losses from step --late-from on to another one (bf16
runs: a rounding that falls the other way compounds over the steps).
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def load_metrics(path):
    """The losses of METRICS.jsonl indexed by step (None where a step is
    missing) and the number of non-empty lines."""
    by_step, lines = {}, 0
    with open(path) as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                by_step[int(record["step"])] = float(record["loss"])
                lines += 1
    count = max(by_step) + 1 if by_step else 0
    return [by_step.get(step) for step in range(count)], lines


def load_initializers(path):
    return {t.name: numpy_helper.to_array(t)
            for t in onnx.load(path).graph.initializer}


def relative_error(actual, expected):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.size == 0:
        return 0.0
    scale = max(float(np.max(np.abs(expected))), 1e-12)
    return float(np.max(np.abs(actual - expected))) / scale


def report(label, rel, rtol):
    """Prints one result line; returns whether it is within rtol (NaN is not)."""
    good = bool(rel <= rtol)
    print(f"{label}: {'ok' if good else 'MISMATCH'} (rel {rel:.2g})")
    return good


def compare_losses(ref_losses, losses, lines, rtol_of_step):
    ok = True
    if lines != len(ref_losses) or len(losses) != len(ref_losses):
        print(f"steps: MISMATCH metrics has {lines} lines (last step "
              f"{len(losses) - 1}), the reference {len(ref_losses)} steps")
        ok = False
    for step, expected in enumerate(ref_losses):
        actual = losses[step] if step < len(losses) else None
        if actual is None:
            print(f"loss step {step}: MISMATCH missing from the metrics")
            ok = False
            continue
        ok &= report(f"loss step {step}", relative_error(actual, expected),
                     rtol_of_step(step))
    return ok


def compare_weights(ref_dir, initializers, names, rtol):
    ok = True
    for name in names:
        expected = np.load(os.path.join(ref_dir, f"{name}.npy"))
        actual = initializers.get(name)
        if actual is None:
            print(f"weight {name}: MISMATCH missing from the trained model")
            ok = False
        elif actual.shape != expected.shape:
            print(f"weight {name}: MISMATCH shape {list(actual.shape)} vs "
                  f"pytorch {list(expected.shape)}")
            ok = False
        else:
            ok &= report(f"weight {name}", relative_error(actual, expected),
                         rtol)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ref_dir")
    parser.add_argument("metrics")
    parser.add_argument("trained")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--weight-rtol", type=float)
    parser.add_argument("--late-rtol", type=float)
    parser.add_argument("--late-from", type=int)
    args = parser.parse_args()
    if (args.late_rtol is None) != (args.late_from is None):
        parser.error("--late-rtol and --late-from go together")
    weight_rtol = args.rtol if args.weight_rtol is None else args.weight_rtol
    with open(os.path.join(args.ref_dir, "losses.json")) as f:
        ref_losses = json.load(f)
    names = sorted(f[:-4] for f in os.listdir(args.ref_dir)
                   if f.endswith(".npy"))
    if not ref_losses or not names:
        parser.error(f"{args.ref_dir} has no losses or no parameters")
    losses, lines = load_metrics(args.metrics)
    def rtol_of_step(step):
        late = args.late_from is not None and step >= args.late_from
        return args.late_rtol if late else args.rtol
    ok = compare_losses(ref_losses, losses, lines, rtol_of_step)
    ok &= compare_weights(args.ref_dir, load_initializers(args.trained), names,
                          weight_rtol)
    tolerance = f"{args.rtol:g}"
    if args.late_from is not None:
        tolerance += f" ({args.late_rtol:g} from step {args.late_from})"
    if weight_rtol != args.rtol:
        tolerance += f" (weights {weight_rtol:g})"
    if not ok:
        print(f"FAILED: the training run differs from PyTorch's (rtol "
              f"{tolerance})")
        return 1
    print(f"all {len(ref_losses)} losses and {len(names)} weights within "
          f"{tolerance}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
