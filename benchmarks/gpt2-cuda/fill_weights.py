#!/usr/bin/env python3
"""Gives a plan's GPT parameters GPT-2's initialization, in place.

    fill_weights.py PLAN [--seed 0] [--std 0.02]

export_gpt2.py zeroes the parameters so that the plan travels compressed;
this restores realistic values (GEMM speed depends a little on the data:
tensor cores draw less power on zeros). Every state weight that is not
optimizer state ("optimizer.*") is filled: matrices and embeddings from
N(0, std), LayerNorm scales with ones, biases with zeros. Optimizer state
stays zero, read-only weights (the causal masks) keep their values. Reads
the plan header (docs/design/plan-format.md) and writes the data section
through a memory map.
"""
import argparse
import re
import sys

import numpy as np

WEIGHT = re.compile(rb'^weight (\d+) "((?:[^"\\]|\\.)*)" (\w+) \[([\d,]*)\] '
                    rb'offset (\d+) bytes (\d+)( state)?')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--std", type=float, default=0.02)
    args = parser.parse_args()
    weights, data_start = [], None
    with open(args.plan, "rb") as f:
        offset = 0
        for line in f:
            offset += len(line)
            if line.startswith(b"data "):
                data_start = offset
                break
            match = WEIGHT.match(line)
            if match:
                weights.append(match)
    if data_start is None:
        sys.exit("fill_weights.py: %s has no data section" % args.plan)
    data = np.memmap(args.plan, dtype=np.uint8, mode="r+", offset=data_start)
    rng = np.random.default_rng(args.seed)
    filled = 0
    for match in weights:
        name = match.group(2).decode()
        dtype, state = match.group(3).decode(), match.group(7)
        if not state or name.startswith("optimizer.") or dtype != "f32":
            continue
        shape = [int(d) for d in match.group(4).split(b",") if d]
        offset, size = int(match.group(5)), int(match.group(6))
        view = data[offset:offset + size].view(np.float32)
        if len(shape) >= 2:
            view[:] = rng.normal(0.0, args.std, view.size).astype(np.float32)
        elif re.search(r"ln_\w*\.weight$|ln_f\.weight$", name):
            view[:] = 1.0
        else:
            view[:] = 0.0
        filled += 1
    data.flush()
    print("filled %d parameters of %s" % (filled, args.plan))


if __name__ == "__main__":
    main()
