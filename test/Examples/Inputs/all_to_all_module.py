"""Writes, or checks the results of, a module whose values move their split
between dimensions (loom-partition's all_to_all).

    all_to_all_module.py write OUT.mlir RANKS
    all_to_all_module.py check OUTPUT_DIR RANKS

`write` makes @move on a mesh <tp = RANKS>: @a [4, 8] split on rows plus @b
split on columns (b moves to rows), and @c [2, 8, 4] split on dim 1 pinned
split on dim 2, then negated. `check` compares every rank's results (from
`loom-run --output-dir`) with NumPy's a + b and -c, exactly, and prints one
line per rank.
"""
import sys

import numpy as np


def values(ranks):
    a = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    b = a * 100
    c = np.arange(2 * 8 * 4 * ranks, dtype=np.float32).reshape(2, 8, 4 * ranks)
    return a, b, c


def dense(array):
    text = np.array2string(array, separator=", ", threshold=10**6,
                           floatmode="fixed", precision=1)
    return "dense<" + text.replace("\n", "") + ">"


def tensor(array):
    return "tensor<" + "x".join(str(d) for d in array.shape) + "xf32>"


def write(path, ranks):
    a, b, c = values(ranks)
    with open(path, "w") as out:
        out.write(f"""module {{
  loom.mesh @mesh = <tp = {ranks}>
  loom.parameter @a trainable : {tensor(a)} sharding <@mesh, [{{tp}}, {{}}]> = {dense(a)} : {tensor(a)}
  loom.parameter @b trainable : {tensor(b)} sharding <@mesh, [{{}}, {{tp}}]> = {dense(b)} : {tensor(b)}
  loom.parameter @c trainable : {tensor(c)} sharding <@mesh, [{{}}, {{tp}}, {{}}]> = {dense(c)} : {tensor(c)}
  func.func @move() -> ({tensor(a)}, {tensor(c)}) {{
    %a = loom.param @a : {tensor(a)}
    %b = loom.param @b : {tensor(b)}
    %s = loom.add %a, %b : {tensor(a)}
    %c = loom.param @c : {tensor(c)}
    %m = loom.shard %c to <@mesh, [{{}}, {{}}, {{tp}}]> : {tensor(c)}
    %n = loom.neg %m : {tensor(c)}
    return %s, %n : {tensor(a)}, {tensor(c)}
  }}
}}
""")


def check(directory, ranks):
    a, b, c = values(ranks)
    ok = True
    for rank in range(ranks):
        sums = np.load(f"{directory}/rank{rank}/result0.npy")
        negated = np.load(f"{directory}/rank{rank}/result1.npy")
        good = np.array_equal(sums, a + b) and np.array_equal(negated, -c)
        ok &= good
        print(f"rank {rank}: {'exact' if good else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    mode, path, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "write":
        write(path, ranks)
        sys.exit(0)
    sys.exit(check(path, ranks))
