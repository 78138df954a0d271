#!/usr/bin/env python3
"""Exports an example model for training and saves PyTorch's gradients.

    export_with_gradients.py {gpt,mlp} OUT_DIR

Writes OUT_DIR/model.onnx (training-mode export: `training=TRAINING,
do_constant_folding=False`, so initializers keep their PyTorch names and are
never merged), the inputs OUT_DIR/input.npy and OUT_DIR/labels.npy, and in
OUT_DIR/ref/ the cross-entropy loss.npy (mean over all positions) and
grad.<parameter>.npy of every parameter after loss.backward().
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples")


def main():
    which, out = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(out, "ref"), exist_ok=True)
    torch.manual_seed(0)
    if which == "gpt":
        sys.path.insert(0, os.path.join(ROOT, "gpt"))
        import export_gpt
        model = export_gpt.GPT(vocab=64, block_size=16, n_layer=2, n_head=2,
                               n_embd=32)
        inputs = torch.randint(0, 64, (2, 16))
        labels = torch.randint(0, 64, (2, 16))
        name = "idx"
    else:
        sys.path.insert(0, os.path.join(ROOT, "mlp"))
        import export_mlp
        model = export_mlp.MLP()
        inputs = torch.randn(4, export_mlp.IN_FEATURES)
        labels = torch.randint(0, export_mlp.CLASSES, (4,))
        name = "x"
    model.train()
    torch.onnx.export(model, (inputs,), os.path.join(out, "model.onnx"),
                      opset_version=17, input_names=[name],
                      output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    logits = model(inputs)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           labels.reshape(-1))
    loss.backward()
    np.save(os.path.join(out, "input.npy"), inputs.numpy())
    np.save(os.path.join(out, "labels.npy"), labels.numpy())
    np.save(os.path.join(out, "ref", "loss.npy"), loss.detach().numpy())
    for parameter, value in model.named_parameters():
        np.save(os.path.join(out, "ref", f"grad.{parameter}.npy"),
                value.grad.numpy())
    return 0


if __name__ == "__main__":
    sys.exit(main())
