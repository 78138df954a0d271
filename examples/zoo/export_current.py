#!/usr/bin/env python3
"""Exports the zoo with a current PyTorch's default exporter
(torch.onnx.export(..., dynamo=True), the torch.export-based one that
PyTorch 2.9+ uses by default and that writes opset 18+, local functions
and the newer op forms), together with PyTorch's references, for
`zoo.py --from-dir` to check Loom against on another machine.

    export_current.py OUT_DIR [--families ...] [--source repo|hf]
                      [--steps 10]

Writes OUT_DIR/<source>-<family>/: model.onnx, the example inputs and
their logits (logits.npy), a training data set (data.<input>.npy,
labels.npy) and PyTorch's per-step AdamW losses on it (losses.json, the
same hyper-parameters as zoo.py), and meta.json (torch version, opset,
padding rows). Needs torch >= 2.5 with onnxscript (and transformers for
--source hf).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402
import zoo  # noqa: E402


args_optimize = False


def exported_names(path, model, padding):
    """The names the exporter gave the padded embedding tables (a tied
    table takes the name of one of its users): the initializer a Gather
    reads whose values are the parameter's."""
    import onnx
    from onnx import numpy_helper
    graph = onnx.load(path).graph
    tables = {n.input[0] for n in graph.node if n.op_type == "Gather"}
    parameters = dict(model.named_parameters())
    renamed = {}
    for name, row in padding.items():
        value = parameters[name].detach().numpy()
        for tensor in graph.initializer:
            if tensor.name in tables and list(tensor.dims) == list(
                    value.shape) and np.array_equal(
                        numpy_helper.to_array(tensor), value):
                renamed[tensor.name] = row
    return renamed


def export(family, source, out, steps):
    build = zoo.build_hf if source == "hf" else models.build
    model, inputs, labels_shape, padding, classes = build(family)
    model.eval()  # the new exporter traces inference; dropout is 0 anyway
    names = list(inputs)
    # optimize=False: the exporter's optimizer folds what training needs
    # (Linear weights transposed into new initializers, lookups of
    # constant positions into constants, equal initializers merged).
    program = torch.onnx.export(model, tuple(inputs.values()), dynamo=True,
                                optimize=args_optimize, input_names=names,
                                output_names=["logits"])
    program.save(os.path.join(out, "model.onnx"))
    padding = exported_names(os.path.join(out, "model.onnx"), model, padding)
    with torch.no_grad():
        np.save(os.path.join(out, "logits.npy"),
                model(*inputs.values()).numpy())
    for name, tensor in inputs.items():
        np.save(os.path.join(out, name + ".npy"), tensor.numpy())
    data, labels = zoo.data_set(inputs, labels_shape, classes, 3, seed=7)
    for name, tensor in data.items():
        np.save(os.path.join(out, "data." + name + ".npy"), tensor.numpy())
    np.save(os.path.join(out, "labels.npy"), labels.numpy())
    model.train()
    batch = labels_shape[0]
    losses = zoo.train_torch(model, names, data, labels, batch, steps)
    import onnx
    opset = [o.version for o in onnx.load(os.path.join(out, "model.onnx"))
             .opset_import if o.domain in ("", "ai.onnx")][0]
    with open(os.path.join(out, "losses.json"), "w") as f:
        json.dump(losses, f)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"torch": torch.__version__, "opset": opset,
                   "inputs": names, "batch": batch, "padding": padding}, f)
    return opset


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--families", default=",".join(models.FAMILIES))
    parser.add_argument("--source", choices=["repo", "hf"], default="repo")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--optimize", action="store_true",
                        help="let the exporter optimize the graph (folds "
                        "parameters away: for inference only)")
    args = parser.parse_args()
    global args_optimize
    args_optimize = args.optimize
    for family in args.families.split(","):
        out = os.path.join(args.out_dir, "%s-%s" % (args.source, family))
        os.makedirs(out, exist_ok=True)
        try:
            opset = export(family, args.source, out, args.steps)
            print("%s %s: exported at opset %d" % (args.source, family, opset),
                  flush=True)
        except Exception as error:  # noqa: BLE001 (reported, then next)
            print("%s %s: export FAILED: %s: %s" % (
                args.source, family, type(error).__name__,
                str(error).splitlines()[0][:300]), flush=True)


if __name__ == "__main__":
    main()
