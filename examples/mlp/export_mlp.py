#!/usr/bin/env python3
"""Export a small MLP classifier to ONNX for the Loom importer.

Run with the Debian interpreter, which has torch 1.13 / onnx 1.12 / numpy:

    /usr/bin/python3 examples/mlp/export_mlp.py --opset 17 --out /tmp/mlp.onnx
    /usr/bin/python3 examples/mlp/export_mlp.py --opset 14 --out /tmp/mlp_loss.onnx \
        --with-loss --batch-dynamic --save-reference /tmp/mlp_ref

Model: Linear(32,64) -> ReLU -> Linear(64,64) -> Tanh -> Linear(64,10)
(MLP(activation="gelu_tanh") has the tanh GELU in place of the ReLU).

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
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from onnx_export import export  # noqa: E402

IN_FEATURES, HIDDEN, CLASSES, EXAMPLE_BATCH = 32, 64, 10, 4


class MLP(nn.Module):
    def __init__(self, activation="relu"):
        super().__init__()
        first = {"relu": nn.ReLU(),
                 "gelu_tanh": nn.GELU(approximate="tanh")}[activation]
        self.net = nn.Sequential(
            nn.Linear(IN_FEATURES, HIDDEN), first,
            nn.Linear(HIDDEN, HIDDEN), nn.Tanh(),
            nn.Linear(HIDDEN, CLASSES))

    def forward(self, x, labels=None):
        logits = self.net(x)
        if labels is None:
            return logits
        return logits, F.cross_entropy(logits, labels)  # SoftmaxCrossEntropyLoss


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

    return export(model, example, input_names, output_names, dynamic_axes,
                  args)


if __name__ == "__main__":
    sys.exit(main())
