#!/usr/bin/env python3
"""ZeRO's memory table, reproduced by the compiler for a shapes-only model.

    zero_memory.py --loom-run BUILD/bin/loom-run [--layers 36 --embd 4096
        --heads 32 --vocab 51200 --seq 1024] [--ranks 1,4,16,64]

Builds a GPT-shaped model without weights (benchmarks/tensor-parallel
bench.py shapes-only-gpt; the defaults are Megatron's 7.5B shape, 36 layers
of hidden 4096 and 32 heads, vocabulary 51200), then for every N and ZeRO
stage compiles the AdamW training step with `loom-run --train --dp N --zero
K --no-weights --compile-only --report-json` (nothing runs: a plan of shapes
only) and prints, per rank, the model states the compiler planned
(param_bytes + grad_bytes + optimizer_bytes) beside ZeRO's formula for them
(arXiv 1910.02054, in f32 as Loom trains them: 4 Psi parameters, 4 Psi
gradients, 8 Psi AdamW moments; stage 1 divides the moments by N, stage 2
the gradients too, stage 3 everything), and the planned peak (model states
plus the activations of one sequence per rank: the global batch is N
sequences, one per rank). Psi is the model's parameter count. Prints
"all figures match" when every planned figure equals its formula within
the padding divisibility needs (printed), else "MISMATCH" (exit 1).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "tensor-parallel", "bench.py")


def gib(n):
    return n / 2**30


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--loom-run", required=True)
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--embd", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=51200)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--ranks", default="1,4,16,64")
    parser.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                        help="bf16: --precision bf16 --grad-precision bf16, "
                        "beside ZeRO's mixed-precision formula")
    parser.add_argument("--work", help="folder for the model (default: a "
                        "temporary one)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="loom-zero-memory-")
    model = os.path.join(work, "gpt.onnx")
    made = subprocess.run(
        [sys.executable, BENCH, "shapes-only-gpt", "--out", model,
         "--layers", str(args.layers), "--embd", str(args.embd),
         "--heads", str(args.heads), "--vocab", str(args.vocab),
         "--seq", str(args.seq)], check=True, capture_output=True, text=True)
    print(made.stdout.strip())
    # "params: N (...)": the model's parameter count.
    psi = next(int(line.split()[1]) for line in made.stdout.splitlines()
               if line.startswith("params:"))

    rows = []
    ok = True
    for n in [int(x) for x in args.ranks.split(",")]:
        for stage in ([0] if n == 1 else [0, 1, 2, 3]):
            report = os.path.join(work, "n%d-z%d.json" % (n, stage))
            cmd = [args.loom_run, model, "--train", "--no-weights",
                   "--compile-only", "--optimizer", "adamw",
                   "--dim", "batch=%d" % n, "--batch-size", str(n),
                   "--dp", str(n), "--report-json", report]
            if stage:
                cmd += ["--zero", str(stage)]
            if args.precision == "bf16":
                cmd += ["--precision", "bf16", "--grad-precision", "bf16"]
            started = time.time()
            run = subprocess.run(cmd, capture_output=True, text=True)
            seconds = time.time() - started
            if run.returncode:
                sys.exit("failed: %s\n%s" % (" ".join(cmd), run.stderr))
            with open(report) as f:
                ranks = json.load(f)["ranks"]
            first = ranks[0]
            alike = all({k: v for k, v in r.items() if k != "rank"} ==
                        {k: v for k, v in first.items() if k != "rank"}
                        for r in ranks)
            states = (first["param_bytes"] + first["grad_bytes"] +
                      first["optimizer_bytes"])
            p, g, o = 4 * psi, 4 * psi, 8 * psi
            formula = {0: p + g + o, 1: p + g + o / n, 2: p + (g + o) / n,
                       3: (p + g + o) / n}[stage]
            # ZeRO's mixed-precision accounting (2 + 2 + 12).
            mixed = {0: 16 * psi, 1: 4 * psi + 12 * psi / n,
                     2: 2 * psi + 14 * psi / n, 3: 16 * psi / n}[stage]
            # The step counter (8 bytes) is optimizer state too; padding is
            # what a dimension N does not divide leaves whole. In bf16 the
            # difference is the parameters read in f32 (embeddings, layer
            # norms, biases added in f32), which have no bf16 copy: their
            # f32 masters are the parameters, whole at stages 0 to 2, and
            # printed, not checked.
            padding = states - (formula if args.precision == "f32"
                                else mixed) - 8
            good = alike and (args.precision == "bf16" or
                              abs(padding) <= 1e-4 * formula)
            ok &= good
            rows.append((n, stage, gib(first["param_bytes"]),
                         gib(first["grad_bytes"]),
                         gib(first["optimizer_bytes"]), gib(states),
                         gib(formula), padding, gib(mixed),
                         gib(first["planned_peak_bytes"]), seconds,
                         "" if good else "  MISMATCH" + (
                             "" if alike else " (ranks differ)")))
    print("Psi = %d parameters; per rank, GiB (2^30 bytes):" % psi)
    print("%4s %5s %9s %9s %9s %9s %9s %9s %9s %9s %8s" % (
        "N", "stage", "params", "grads", "optim", "states",
        "f32-form" if args.precision == "f32" else "(f32)",
        "padding", "ZeRO-mp", "peak", "compile"))
    for (n, stage, pb, gb, ob, states, formula, padding, mixed, peak,
         seconds, note) in rows:
        print("%4d %5d %9.2f %9.2f %9.2f %9.2f %9.2f %9d %9.2f %9.2f %7.1fs%s"
              % (n, stage, pb, gb, ob, states, formula, padding, mixed, peak,
                 seconds, note))
    if args.precision == "f32":
        print("(formula: f32 AdamW as Loom trains, 4+4+8 Psi bytes, sharded "
              "by stage; ZeRO-mp: the paper's mixed-precision 2+2+12 Psi, "
              "which --precision bf16 --grad-precision bf16 reaches; "
              "padding in bytes, beyond the 8-byte step count)")
    else:
        print("(bf16 parameters and gradients, f32 masters and moments: "
              "ZeRO-mp is the paper's 2+2+12 Psi, and `padding` the bytes "
              "beyond it (and the 8-byte step count): the parameters read "
              "in f32, which keep their f32 masters as the parameter)")
    print("all figures match" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
