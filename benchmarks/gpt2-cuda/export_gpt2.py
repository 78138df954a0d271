#!/usr/bin/env python3
"""Exports the GPT-2-small-shaped benchmark model for training, weights zeroed.

    /usr/bin/python3 export_gpt2.py OUT.onnx [--batch 8] [--layers 12]
        [--heads 12] [--embd 768] [--seq 1024] [--vocab 50257]
        [--gelu tanh|none] [--dynamic-batch]

The model is examples/gpt/export_gpt.GPT (GPT-2's architecture: learned
positions, pre-LayerNorm blocks, GPT-2's tanh GELU (--gelu none: the exact
one), an untied LM head) in a
training-mode export with a static [batch, seq] input, as
examples/gpt/export_for_training.py does. Every *parameter* is zeroed so
that the plan compiled from it compresses to almost nothing and can travel
to a GPU machine; fill_weights.py gives it GPT-2's initialization there. The
causal-mask buffers keep their values. --dynamic-batch makes the batch
dimension symbolic, as loom-plan needs (benchmarks/planner/gpu_accuracy.py).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "gpt"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from export_gpt import GPT  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--embd", type=int, default=768)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--gelu", choices=["tanh", "none"], default="tanh")
    parser.add_argument("--dynamic-batch", action="store_true",
                        help="a symbolic batch dimension (what loom-plan "
                        "needs to plan the model)")
    args = parser.parse_args()
    model = GPT(vocab=args.vocab, block_size=args.seq, n_layer=args.layers,
                n_head=args.heads, n_embd=args.embd, gelu=args.gelu)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    model.train()
    idx = torch.zeros(args.batch, args.seq, dtype=torch.int64)
    torch.onnx.export(model, (idx,), args.out, export_params=True,
                      opset_version=17, input_names=["idx"],
                      output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False,
                      dynamic_axes={"idx": {0: "batch"}}
                      if args.dynamic_batch else None)
    count = sum(p.numel() for p in model.parameters())
    print("exported %s: %d parameters, batch %d, seq %d" %
          (args.out, count, args.batch, args.seq))


if __name__ == "__main__":
    main()
