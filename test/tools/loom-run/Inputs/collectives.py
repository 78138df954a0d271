"""Inputs and numpy reference for Inputs/collectives-4-ranks.mlir.

  collectives.py inputs DIR       writes DIR/x<rank>.npy (rank-dependent data)
  collectives.py check DIR OUT    compares OUT/rank<r>/<output>.npy with what
                                  numpy computes from DIR/x<rank>.npy

The groups and pairs below are the ones written in the .mlir program.
"""
import os
import sys

import numpy as np

RANKS = 4


def inputs(directory):
    rng = np.random.default_rng(6)
    for rank in range(RANKS):
        x = rng.standard_normal((2, 4)).astype(np.float32) + 10 * rank
        np.save(os.path.join(directory, f"x{rank}.npy"), x)


def group_of(rank, groups):
    return next(g for g in groups if rank in g)


def expected(xs, rank):
    every = [0, 1, 2, 3]
    result = {"sum": sum(xs[r] for r in every)}
    pair = group_of(rank, [[0, 1], [2, 3]])
    result["gathered"] = np.concatenate([xs[r] for r in pair], axis=0)
    strided = group_of(rank, [[0, 2], [1, 3]])
    biggest = np.maximum(xs[strided[0]], xs[strided[1]])
    result["piece"] = biggest[strided.index(rank):strided.index(rank) + 1]
    result["from_root"] = xs[every[1]]
    # all_to_all over dim 0: piece j of rank i -> piece i of rank j.
    me = pair.index(rank)
    result["swapped"] = np.concatenate(
        [xs[peer][me:me + 1] for peer in pair], axis=0)
    # A ring: rank r sends to r+1 and receives from r-1.
    result["received"] = xs[(rank - 1) % RANKS]
    # all_gather along dim 1 (decomposed into transposes by the compiler).
    result["gathered_hidden"] = np.concatenate([xs[r] for r in pair], axis=1)
    return result


def check(directory, out):
    xs = [np.load(os.path.join(directory, f"x{r}.npy")) for r in range(RANKS)]
    failures = 0
    for rank in range(RANKS):
        for name, want in expected(xs, rank).items():
            path = os.path.join(out, f"rank{rank}", f"{name}.npy")
            got = np.load(path)
            if got.shape != want.shape or not np.allclose(got, want, rtol=1e-6):
                print(f"rank {rank} {name}: got {got.tolist()}, "
                      f"expected {want.tolist()}")
                failures += 1
    if failures:
        sys.exit(1)
    print(f"all {RANKS} ranks match numpy")


if __name__ == "__main__":
    if sys.argv[1] == "inputs":
        inputs(sys.argv[2])
    else:
        check(sys.argv[2], sys.argv[3])
