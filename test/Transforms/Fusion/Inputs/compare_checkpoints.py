"""Compares two one-rank loom-run states bit for bit.

    compare_checkpoints.py WITH_COPIES WITHOUT_COPIES

Each is a checkpoint (DIR/rank0.ckpt, which holds no bf16 copies: they are
derived on loading) or a --save-weights folder (one NAME.npy per state
weight, the bf16 copies among them, saved as the f32 values they hold).

Every state weight of WITHOUT_COPIES must have the same bytes in
WITH_COPIES. The weights only WITH_COPIES has must be bf16 copies,
`<name>.bf16`, holding exactly `<name>` rounded to bf16 (to nearest, ties
to even), as the update kernel that writes them must keep them.
"""
import os
import sys

import numpy as np

DTYPES = {"f32": np.float32, "f64": np.float64, "bf16": np.uint16,
          "i64": np.int64, "i32": np.int32}


def read(directory):
    if not os.path.exists(directory + "/rank0.ckpt"):
        weights = {}
        for file in os.listdir(directory):
            name, value = file[:-len(".npy")], np.load(directory + "/" + file)
            if name.endswith(".bf16"):  # exact bf16 values: their top bits
                value = (value.astype(np.float32).view(np.uint32) >>
                         16).astype(np.uint16)
            weights[name] = value
        return weights
    with open(directory + "/rank0.ckpt", "rb") as f:
        blob = f.read()
    header, _, data = blob.partition(b"\ndata ")
    size, _, data = data.partition(b"\n")
    assert len(data) == int(size), "truncated checkpoint"
    weights, offset = {}, 0
    for line in header.decode().splitlines():
        if not line.startswith("weight "):
            continue
        _, dtype, shape, nbytes, name = line.split(" ", 4)
        nbytes = int(nbytes)
        weights[name] = np.frombuffer(data[offset:offset + nbytes],
                                      DTYPES[dtype]).copy()
        offset += nbytes
    return weights


def round_to_bf16(values):
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded


def main():
    with_copies, without = read(sys.argv[1]), read(sys.argv[2])
    failures = 0
    for name, value in sorted(without.items()):
        same = name in with_copies and (
            with_copies[name].tobytes() == value.tobytes())
        print("%s: %s" % (name, "identical" if same else "DIFFERENT"))
        failures += not same
    for name in sorted(set(with_copies) - set(without)):
        source = name[:-len(".bf16")]
        ok = name.endswith(".bf16") and source in without and np.array_equal(
            with_copies[name], round_to_bf16(without[source]))
        print("%s: %s" % (name, "the bf16 rounding of " + source if ok
                          else "NOT A COPY"))
        failures += not ok
    print("FAILED" if failures else "all state identical")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
