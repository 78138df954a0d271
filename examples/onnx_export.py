"""Shared by the example exporters: torch.onnx.export, a check that the graph
uses only ops Loom imports, a summary, and PyTorch reference outputs.

Run the exporters with /usr/bin/python3 (Debian's torch 1.13 / onnx 1.12).
"""

import collections
import os
import sys

import numpy as np
import onnx
import torch

# The op types the Loom importer converts (lib/Import/ONNX/*Converters.cpp).
ALLOWED_OPS = {
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal",
    "Erf", "Tanh", "Sigmoid", "Relu", "Exp", "Log", "Neg", "Softmax",
    "LogSoftmax", "LayerNormalization", "ReduceMean", "ReduceSum", "ReduceMax",
    "Reshape", "Transpose", "Slice", "Gather", "Concat", "Split", "Unsqueeze",
    "Squeeze", "Expand", "Shape", "Constant", "ConstantOfShape", "Identity",
    "Cast", "Where", "Equal", "Less", "Greater", "Dropout", "Flatten",
    "SoftmaxCrossEntropyLoss",
}


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


def export(model, example, input_names, output_names, dynamic_axes, args):
    """Exports `model` on `example` to args.out at args.opset; with
    args.save_reference, also writes every input and output as NAME.npy
    (input #0 as input.npy). Returns the script's exit code."""
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    torch.onnx.export(model, example, args.out, export_params=True,
                      opset_version=args.opset, do_constant_folding=True,
                      input_names=input_names, output_names=output_names,
                      dynamic_axes=dynamic_axes)
    if args.save_reference:
        os.makedirs(args.save_reference, exist_ok=True)
        with torch.no_grad():
            outputs = model(*example)
        if not isinstance(outputs, tuple):
            outputs = (outputs,)
        names = ["input"] + input_names[1:] + output_names
        for name, value in zip(names, list(example) + list(outputs)):
            np.save(os.path.join(args.save_reference, name + ".npy"),
                    value.numpy())
    n_params = sum(t.numel() for t in model.parameters())
    return check_and_summarize(args.out, args.opset, n_params)
