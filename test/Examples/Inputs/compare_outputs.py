#!/usr/bin/env python3
"""Compares loom-run's outputs with reference outputs that PyTorch wrote.

    compare_outputs.py REF_DIR OUT_DIR NAME... [--atol 1e-4]
    compare_outputs.py REF_DIR OUT_DIR --all [--atol 1e-4]

For every NAME (with --all: every .npy file in REF_DIR), REF_DIR/NAME.npy (PyTorch, written by the example's
--save-reference) and OUT_DIR/NAME.npy (loom-run --output-dir) must have the
same shape and dtype and differ by at most --atol elementwise. Prints one line
per output with the largest difference; exits 1 on any mismatch.
"""
import argparse
import os
import sys

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ref_dir")
    parser.add_argument("out_dir")
    parser.add_argument("names", nargs="*")
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--atol", type=float, default=1e-4)
    args = parser.parse_args()
    if args.all:
        args.names = sorted(f[:-4] for f in os.listdir(args.ref_dir)
                            if f.endswith(".npy"))
    if not args.names:
        parser.error("no outputs to compare")
    ok = True
    for name in args.names:
        ref = np.load(f"{args.ref_dir}/{name}.npy")
        if not os.path.exists(f"{args.out_dir}/{name}.npy"):
            print(f"{name}: MISSING from loom-run's outputs")
            ok = False
            continue
        out = np.load(f"{args.out_dir}/{name}.npy")
        if ref.shape != out.shape or ref.dtype != out.dtype:
            print(f"{name}: MISMATCH loom {out.dtype}{list(out.shape)} vs "
                  f"pytorch {ref.dtype}{list(ref.shape)}")
            ok = False
            continue
        diff = float(np.max(np.abs(out.astype(np.float64) - ref))) if ref.size else 0.0
        good = diff <= args.atol
        ok &= good
        print(f"{name}: {'ok' if good else 'MISMATCH'} max |loom - pytorch| = "
              f"{diff:.3g} (atol {args.atol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
