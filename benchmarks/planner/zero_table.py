#!/usr/bin/env python3
"""ZeRO's Table 1 (Rajbhandari et al. 2020) from the planner's memory report.

    /usr/bin/python3 benchmarks/planner/zero_table.py [--build build]

The 7.5B-shaped GPT (36 layers, width 4096, 32 heads, vocabulary 51200,
sequence 2048; shapes only) planned by `loom-plan --evaluate` at data
parallelism N = 1, 4, 16, 64, 256 and 1024 and each ZeRO stage, in mixed
precision with bf16 gradients (ZeRO's K = 12: fp32 master, momentum and
variance). Each cell is rank 0's model states (parameters + gradients +
optimizer state, GB = 10^9 bytes) as the compiler plans them, beside
ZeRO's formula for this model's Psi and the paper's figure for 7.5B.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
PAPER = {  # N: (Pos, Pos+g, Pos+g+p) in GB, 7.5B, K = 12
    1: (120, 120, 120), 4: (52.5, 41.3, 30), 16: (35.6, 21.6, 7.5),
    64: (31.4, 16.6, 1.88), 256: (30.4, 15.4, 0.47),
    1024: (30.1, 15.1, 0.12)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = p.parse_args()
    loom_plan = os.path.join(args.build, "bin", "loom-plan")
    work = tempfile.mkdtemp(prefix="loom-zero-table.")
    model = os.path.join(work, "gpt7p5.onnx")
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "tensor-parallel",
                                      "bench.py"), "shapes-only-gpt", "--out",
         model, "--layers", "36", "--embd", "4096", "--heads", "32",
         "--vocab", "51200", "--seq", "2048"],
        capture_output=True, text=True, check=True).stdout
    psi = int(out.split("params:")[1].split()[0])
    cluster = os.path.join(ROOT, "examples", "clusters",
                           "megatron-a100-cluster.json")
    print(f"Psi = {psi / 1e9:.3f} B parameters; model states per device, GB "
          f"(Loom's plan / ZeRO's formula for this Psi / ZeRO's Table 1)")
    print(f"{'N':>5} {'stage 1 (Pos)':>24} {'stage 2 (Pos+g)':>24} "
          f"{'stage 3 (Pos+g+p)':>24}  plan s")
    for n in sorted(PAPER):
        cells = []
        started = time.time()
        for stage in (1, 2, 3):
            plan = os.path.join(work, "plan.json")
            zero = stage if n > 1 else 0
            subprocess.run(
                [loom_plan, model, "--cluster", cluster, "--devices", str(n),
                 "--global-batch", str(n), "--precision", "bf16",
                 "--grad-precision", "bf16", "--evaluate",
                 f"dp={n},tp=1,pp=1,zero={zero},M=1", "--json", plan],
                capture_output=True, text=True)
            result = json.load(open(plan))
            # A layout that does not fit (N = 1: 16 bytes per parameter are
            # more than 80 GiB) is reported as the closest alternative.
            predicted = result["predicted"] if result["choice"] else \
                result["alternatives"][0]["predicted"]
            states = (predicted["param_bytes"][0] + predicted["grad_bytes"][0]
                      + predicted["optimizer_bytes"][0])
            formula = {1: 4 * psi + 12 * psi / n, 2: 2 * psi + 14 * psi / n,
                       3: 16 * psi / n}[stage] if n > 1 else 16 * psi
            cells.append(f"{states / 1e9:7.2f} /{formula / 1e9:7.2f} /"
                         f"{PAPER[n][stage - 1]:6.2f}")
        print(f"{n:>5} {cells[0]:>24} {cells[1]:>24} {cells[2]:>24}  "
              f"{(time.time() - started) / 3:5.1f}")


if __name__ == "__main__":
    main()
