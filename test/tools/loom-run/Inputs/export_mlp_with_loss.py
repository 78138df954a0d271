#!/usr/bin/env python3
"""Exports the MLP example with its loss inside the graph, for --loss none.

    export_mlp_with_loss.py OUT.onnx

The model takes `x` [4, IN] and `y` [4] (class indices) and returns the mean
cross-entropy first (ONNX SoftmaxCrossEntropyLoss), then the logits. The
weights are those of test/Examples/Inputs/train_reference.py's MLP (seed 0),
so training it with `--loss none` must give the same losses as training that
model with `--loss cross_entropy`.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                "..", "examples", "mlp"))
import export_mlp  # noqa: E402


class WithLoss(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        logits = self.model(x)
        return F.cross_entropy(logits, y), logits


def main():
    torch.manual_seed(0)
    model = WithLoss(export_mlp.MLP())
    model.train()
    x = torch.randn(4, export_mlp.IN_FEATURES)
    y = torch.randint(0, export_mlp.CLASSES, (4,))
    torch.onnx.export(model, (x, y), sys.argv[1], opset_version=17,
                      input_names=["x", "y"], output_names=["loss", "logits"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


if __name__ == "__main__":
    main()
