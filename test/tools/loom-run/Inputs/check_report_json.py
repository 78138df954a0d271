#!/usr/bin/env python3
"""Checks `loom-run --report-json` of the exported MLP (train_reference.py
mlp: net.0 Linear(32, 64), ReLU, net.2 Linear(64, 64), Tanh, net.4
Linear(64, 10)) trained with --tp TP and AdamW, against sizes worked out by
hand from the model's shapes.

    check_report_json.py REPORT.json MODEL.onnx --tp TP --batch-size B

Megatron's layout, which --tp derives for this MLP: net.0 (the first GEMM
of the pair) is split on its output features, so net.0.weight [64,32] is
split on dim 0 and net.0.bias [64] with it; net.2 is then row-split, its
weight [64,64] split on dim 1 (its input features) and its bias whole; the
head net.4 is left whole (10 classes, which tp does not divide). Each rank
holds 1/TP of a split parameter. AdamW keeps exp_avg and exp_avg_sq shaped
like each parameter (sliced alike) and the f64 step counter. The only
collective of the step is the forward all_reduce of net.2's partial output,
[B, 64] f32, which a ring sends 2(n-1)/n times per rank.
"""
import argparse
import json
import sys

import numpy as np
import onnx

SPLIT_DIM = {"net.0.weight": 0, "net.0.bias": 0, "net.2.weight": 1}
KINDS = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all",
         "broadcast", "send"]
KEYS = {"rank", "param_bytes", "grad_bytes", "optimizer_bytes",
        "planned_peak_bytes", "measured_peak_bytes", "comm_bytes"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("model")
    parser.add_argument("--tp", type=int, required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    args = parser.parse_args()
    tp, batch = args.tp, args.batch_size

    shapes = {t.name: list(t.dims)
              for t in onnx.load(args.model).graph.initializer}
    param = 0
    for name, shape in sorted(shapes.items()):
        elements = int(np.prod(shape))
        if name in SPLIT_DIM:
            assert shape[SPLIT_DIM[name]] % tp == 0, name
            elements //= tp
        param += 4 * elements
    expected = {
        "param_bytes": param,
        "grad_bytes": param,
        "optimizer_bytes": 2 * param + 8,
    }
    logits = batch * 64 * 4
    comm = {kind: 0 for kind in KINDS}
    comm["all_reduce"] = 2 * (tp - 1) * logits // tp

    with open(args.report) as f:
        report = json.load(f)
    ranks = report["ranks"]
    failures = []
    if [r["rank"] for r in ranks] != list(range(tp)):
        failures.append("ranks %s, expected 0..%d" %
                        ([r["rank"] for r in ranks], tp - 1))
    for r in ranks:
        if set(r) != KEYS:
            failures.append("rank %d has keys %s" % (r["rank"], sorted(r)))
            continue
        for key, value in expected.items():
            if r[key] != value:
                failures.append("rank %d: %s = %d, expected %d" %
                                (r["rank"], key, r[key], value))
        if r["comm_bytes"] != comm:
            failures.append("rank %d: comm_bytes = %s, expected %s" %
                            (r["rank"], r["comm_bytes"], comm))
        # Planned: the arena and the weights the rank holds (at least its
        # parameters and optimizer state). Measured: the arena's touched
        # pages and the weights as allocated (256-byte aligned each), so
        # within a page and the alignment of the rank's weights (fewer than
        # 64) of the planned peak. Every state weight of both ranks would be
        # 3 * 12416 bytes more on each.
        planned, measured = r["planned_peak_bytes"], r["measured_peak_bytes"]
        if planned < r["param_bytes"] + r["optimizer_bytes"]:
            failures.append("rank %d: planned_peak_bytes %d holds less than "
                            "its state" % (r["rank"], planned))
        if abs(measured - planned) > 4096 + 64 * 256:
            failures.append("rank %d: measured_peak_bytes %d is not the "
                            "planned %d" % (r["rank"], measured, planned))
    for failure in failures:
        print("MISMATCH:", failure)
    if failures:
        sys.exit(1)
    print("%d ranks: %d parameter, %d gradient, %d optimizer bytes each; "
          "%d all_reduce bytes per step; peaks as planned" %
          (len(ranks), param, param, 2 * param + 8, comm["all_reduce"]))


if __name__ == "__main__":
    main()
