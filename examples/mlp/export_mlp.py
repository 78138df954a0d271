#!/usr/bin/env python3
"""Export a small MLP classifier to ONNX for the Loom importer.

Run with the Debian interpreter, which has torch 1.13 / onnx 1.12 / numpy:

    /usr/bin/python3 examples/mlp/export_mlp.py --opset 17 --out /tmp/mlp.onnx
    /usr/bin/python3 examples/mlp/export_mlp.py --opset 14 --out /tmp/mlp_loss.onnx \
        --with-loss --batch-dynamic --save-reference /tmp/mlp_ref

Model: Linear(32,64) -> ReLU -> Linear(64,64) -> Tanh -> Linear(64,10).

Graph interface (batch is a static 4 unless --batch-dynamic, then dim_param 'batch'):
  * inputs:  x       float32 [batch, 32]
             labels  int64   [batch]        (only with --with-loss)
  * outputs: logits  float32 [batch, 10]
             loss    float32 []             (only with --with-loss)
With --with-loss the outputs are ('logits', 'loss'), in that order.

--save-reference DIR writes input.npy / logits.npy (plus labels.npy / loss.npy
with --with-loss) computed by PyTorch on the fixed seeded example input.
"""

import argparse
import collections
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

ALLOWED_OPS = {
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal",
    "Erf", "Tanh", "Sigmoid", "Relu", "Exp", "Log", "Neg", "Softmax",
    "LogSoftmax", "LayerNormalization", "ReduceMean", "ReduceSum", "ReduceMax",
    "Reshape", "Transpose", "Slice", "Gather", "Concat", "Split", "Unsqueeze",
    "Squeeze", "Expand", "Shape", "Constant", "ConstantOfShape", "Identity",
    "Cast", "Where", "Equal", "Less", "Greater", "Dropout", "Flatten",
    "SoftmaxCrossEntropyLoss",
}

IN_FEATURES, HIDDEN, CLASSES, EXAMPLE_BATCH = 32, 64, 10, 4


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(IN_FEATURES, HIDDEN), nn.ReLU(),
            nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
            nn.Linear(HIDDEN, CLASSES))

    def forward(self, x, labels=None):
        logits = self.net(x)
        if labels is None:
            return logits
        return logits, F.cross_entropy(logits, labels)  # SoftmaxCrossEntropyLoss


def check_and_summarize(path, opset, n_params):
    """onnx.checker + op allowlist; prints a summary to stderr. Returns exit code."""
    model = onnx.load(path)
    onnx.checker.check_model(model)
    hist = collections.Counter(n.op_type for n in model.graph.node)
    n_init = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    print(f"[export] {path}: opset {opset}, {n_params} parameters, "
          f"{len(model.graph.node)} nodes, {len(model.graph.initializer)} "
          f"initializers ({n_init} elements)", file=sys.stderr)
    for op, n in sorted(hist.items()):
        print(f"  {op:26s} {n}", file=sys.stderr)
    bad = sorted(set(hist) - ALLOWED_OPS)
    if bad:
        print(f"error: exported graph contains unsupported op types: {', '.join(bad)}",
              file=sys.stderr)
        return 1
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--opset", type=int, required=True, choices=range(13, 18),
                   metavar="{13..17}")
    p.add_argument("--out", required=True, help="output .onnx file")
    p.add_argument("--with-loss", action="store_true",
                   help="add a 'labels' input and a scalar 'loss' output")
    p.add_argument("--batch-dynamic", action="store_true",
                   help="make the batch dimension symbolic ('batch')")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-reference", metavar="DIR",
                   help="save input/labels/logits/loss .npy files from PyTorch")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    model = MLP()
    model.eval()

    gen = torch.Generator().manual_seed(args.seed + 1)
    x = torch.randn(EXAMPLE_BATCH, IN_FEATURES, generator=gen)
    labels = torch.randint(0, CLASSES, (EXAMPLE_BATCH,), dtype=torch.int64,
                           generator=gen)

    if args.with_loss:
        example = (x, labels)
        input_names, output_names = ["x", "labels"], ["logits", "loss"]
    else:
        example = (x,)
        input_names, output_names = ["x"], ["logits"]
    dynamic_axes = None
    if args.batch_dynamic:
        dynamic_axes = {n: {0: "batch"} for n in input_names + ["logits"]}

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    torch.onnx.export(model, example, args.out, export_params=True,
                      opset_version=args.opset, do_constant_folding=True,
                      input_names=input_names, output_names=output_names,
                      dynamic_axes=dynamic_axes)

    if args.save_reference:
        os.makedirs(args.save_reference, exist_ok=True)
        with torch.no_grad():
            out = model(*example)
        np.save(os.path.join(args.save_reference, "input.npy"), x.numpy())
        if args.with_loss:
            logits, loss = out
            np.save(os.path.join(args.save_reference, "labels.npy"), labels.numpy())
            np.save(os.path.join(args.save_reference, "loss.npy"), loss.numpy())
        else:
            logits = out
        np.save(os.path.join(args.save_reference, "logits.npy"), logits.numpy())

    n_params = sum(t.numel() for t in model.parameters())
    return check_and_summarize(args.out, args.opset, n_params)


if __name__ == "__main__":
    sys.exit(main())
