#!/usr/bin/env python3
"""Make a byte-level next-byte-prediction data set from a text file.

    /usr/bin/python3 examples/gpt/make_byte_dataset.py TEXT OUT_DIR \
        --block-size T [--samples S]

Reads TEXT as raw bytes b[0..N) (no decoding, no tokenizer: the vocabulary is
the 256 byte values) and writes

    OUT_DIR/input.npy    int64 [S, T]   row k = b[o_k     : o_k + T]
    OUT_DIR/labels.npy   int64 [S, T]   row k = b[o_k + 1 : o_k + T + 1]

so labels[k, t] is the byte that follows input[k, t] (the next-byte target at
every position), as `loom-run MODEL.onnx --train --input idx=input.npy
--labels labels.npy --loss cross_entropy` expects for logits [S, T, 256].

Window offsets o_k are deterministic (no randomness anywhere):
  * without --samples: stride T, non-overlapping windows o_k = k*T for
    k = 0 .. S-1 with S = (N - 1) // T (every window and its one-byte-shifted
    label window fit; the last N - 1 - S*T bytes are unused);
  * with --samples S: S offsets evenly spaced over the whole text,
    o_k = (k * (N - T - 1)) // (S - 1) for k = 0 .. S-1 (o_0 = 0 and
    o_{S-1} = N - T - 1, the last possible start); S may exceed the number
    of stride-T windows, in which case windows overlap. S = 1 gives o_0 = 0.
Rows are in increasing offset order; shuffle at training time if wanted
(loom-run --shuffle SEED).

For a model with learned absolute position embeddings (export_gpt.GPT)
prefer many overlapping windows (--samples well above N / T) trained with
--shuffle: with stride-T windows each byte of the text always sits at the
same position, so the model can memorize text by position (low training
loss, gibberish when sampled from other offsets) instead of learning it.
"""

import argparse
import os
import sys

import numpy as np


def window_offsets(n_bytes, block_size, samples=None):
    """Start offsets of the windows (see the module docstring)."""
    last = n_bytes - block_size - 1  # last start with a full label window
    if last < 0:
        raise ValueError(f"text of {n_bytes} bytes is too short for "
                         f"--block-size {block_size} (needs >= {block_size + 1})")
    if samples is None:
        count = (n_bytes - 1) // block_size
        return np.arange(count, dtype=np.int64) * block_size
    if samples < 1:
        raise ValueError("--samples must be >= 1")
    if samples == 1:
        return np.zeros(1, dtype=np.int64)
    k = np.arange(samples, dtype=np.int64)
    return (k * last) // (samples - 1)


def make_dataset(data, block_size, samples=None):
    """data: bytes. Returns (input, labels), both int64 [S, block_size]."""
    b = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
    offsets = window_offsets(len(b), block_size, samples)
    cols = np.arange(block_size, dtype=np.int64)
    rows = offsets[:, None] + cols[None, :]
    return b[rows], b[rows + 1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("text", help="input text file (read as bytes)")
    p.add_argument("out_dir", help="writes input.npy and labels.npy here")
    p.add_argument("--block-size", type=int, required=True, metavar="T",
                   help="window length (the model's sequence length)")
    p.add_argument("--samples", type=int, metavar="S",
                   help="number of evenly spaced windows (default: "
                        "non-overlapping stride-T windows)")
    args = p.parse_args()
    if args.block_size < 1:
        p.error("--block-size must be >= 1")

    with open(args.text, "rb") as f:
        data = f.read()
    try:
        inputs, labels = make_dataset(data, args.block_size, args.samples)
    except ValueError as e:
        print(f"make_byte_dataset: error: {e}", file=sys.stderr)
        return 1
    os.makedirs(args.out_dir, exist_ok=True)
    np.save(os.path.join(args.out_dir, "input.npy"), inputs)
    np.save(os.path.join(args.out_dir, "labels.npy"), labels)
    print(f"[data] {args.text}: {len(data)} bytes -> {inputs.shape[0]} windows "
          f"of {args.block_size} bytes: {args.out_dir}/input.npy, "
          f"{args.out_dir}/labels.npy (int64 {list(inputs.shape)})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
