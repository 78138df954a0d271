#!/usr/bin/env python3
"""Export the example GPT (byte-level, vocab 256) to ONNX for training by Loom.

    /usr/bin/python3 examples/gpt/export_for_training.py OUT.onnx \
        [--block-size 64 --layers 2 --heads 4 --embd 128 --seed 0]
        [--vocab 256] [--batch 2] [--static]

Builds export_gpt.GPT(vocab=256, ...) (or --vocab) after
torch.manual_seed(SEED) and exports it with

    torch.onnx.export(model, (idx,), OUT, opset_version=17,
                      input_names=["idx"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, dynamic_axes=...)

Graph interface: input idx int64 [batch, seq], output logits float32
[batch, seq, 256]. Batch and sequence length are symbolic ("batch", "seq";
seq <= block size) unless --static is given, in which case the graph is
fixed at the example shape [--batch, --block-size]. --vocab changes the
vocabulary (benchmarks/cpu-training exports its vocab-8192 GPT with this
script; the model is then no longer byte-level).

Why a training-mode export matters
----------------------------------
PyTorch's default export (eval mode, do_constant_folding=True) is built for
inference and rewrites the parameters:

  * it de-duplicates initializers that merely hold *equal values*. In a
    freshly initialized PyTorch model every LayerNorm weight is all ones and
    every LayerNorm bias all zeros, so they collapse into one initializer
    that the other uses read through Identity nodes. For inference that is
    harmless; for training it ties parameters that PyTorch trains separately
    (one shared update instead of one per LayerNorm), and the trained model
    no longer matches PyTorch's. (export_gpt.GPT perturbs its LayerNorm
    parameters at init partly to dodge this in the inference exports; a
    training export must not depend on such luck.)
  * constant folding pre-transposes every Linear weight into a new
    initializer (onnx::MatMul_123 = W^T), so the ONNX parameter is no
    longer PyTorch's `h.0.mlp.c_fc.weight`, and its name and layout no
    longer map onto model.named_parameters().

With training=TRAINING and do_constant_folding=False every initializer keeps
its PyTorch name and layout, one per parameter (plus the causal-mask buffers
`h.<i>.attn.bias`, which get no gradient), so gradients, optimizer state and
the trained weights that `loom-run --train --save` writes map one to one onto
the PyTorch model. The model has dropout 0, so the training-mode Dropout
nodes are identities.
"""

import argparse
import collections
import os
import sys

import onnx
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.dirname(here))
from export_gpt import GPT  # noqa: E402
from onnx_export import ALLOWED_OPS  # noqa: E402

VOCAB = 256  # bytes


def build_model(args):
    """The exported model: seeded, so a second call returns equal weights."""
    torch.manual_seed(args.seed)
    return GPT(vocab=args.vocab, block_size=args.block_size, n_layer=args.layers,
               n_head=args.heads, n_embd=args.embd)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="output .onnx file")
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--embd", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocab", type=int, default=VOCAB,
                   help=f"vocabulary size (default {VOCAB}: bytes)")
    p.add_argument("--batch", type=int, default=2,
                   help="batch of the example input used for tracing (default 2)")
    p.add_argument("--static", action="store_true",
                   help="fixed shapes [--batch, --block-size] instead of "
                        "symbolic batch and seq")
    args = p.parse_args()

    model = build_model(args)
    model.train()
    gen = torch.Generator().manual_seed(args.seed + 1)
    idx = torch.randint(0, args.vocab, (args.batch, args.block_size),
                        dtype=torch.int64, generator=gen)
    dynamic_axes = None if args.static else {
        "idx": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    torch.onnx.export(model, (idx,), args.out, export_params=True,
                      opset_version=17, input_names=["idx"],
                      output_names=["logits"], dynamic_axes=dynamic_axes,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)

    # Checks: valid ONNX, only ops Loom imports, and one initializer per
    # PyTorch parameter under the parameter's own name.
    m = onnx.load(args.out)
    onnx.checker.check_model(m)
    hist = collections.Counter(n.op_type for n in m.graph.node)
    inits = {t.name for t in m.graph.initializer}
    params = dict(model.named_parameters())
    n_params = sum(t.numel() for t in params.values())
    kind = "byte-level GPT" if args.vocab == VOCAB else f"GPT (vocab {args.vocab})"
    print(f"[export] {args.out}: {kind}, block {args.block_size}, "
          f"{args.layers} layers, {args.heads} heads, embd {args.embd}; "
          f"{n_params} parameters ({len(params)} tensors), "
          f"{len(m.graph.node)} nodes, {len(inits)} initializers",
          file=sys.stderr)
    status = 0
    bad = sorted(set(hist) - ALLOWED_OPS)
    if bad:
        print(f"error: unsupported op types: {', '.join(bad)}", file=sys.stderr)
        status = 1
    missing = sorted(set(params) - inits)
    if missing:
        print(f"error: parameters without an initializer of the same name: "
              f"{', '.join(missing)}", file=sys.stderr)
        status = 1
    if hist.get("Identity"):
        print(f"warning: {hist['Identity']} Identity nodes (tied initializers?)",
              file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
