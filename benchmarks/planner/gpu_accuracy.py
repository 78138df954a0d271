#!/usr/bin/env python3
"""The planner's predictions against measurements on a GPU.

    # here, with MLIR and PyTorch:
    /usr/bin/python3 benchmarks/planner/gpu_accuracy.py make KIT
    # on the GPU machine (a runtime-only build), KIT carried there:
    python3 benchmarks/planner/gpu_accuracy.py run KIT --loom-run L --out DIR
    # here again, with what came back in DIR:
    /usr/bin/python3 benchmarks/planner/gpu_accuracy.py report KIT DIR

The model is the GPT-2-small-shaped benchmark of benchmarks/gpt2-cuda
(12 layers, width 768, 12 heads, sequence 1024, vocabulary 50257; batch 8,
bf16, AdamW), exported with a symbolic batch so that loom-plan can plan it.
`make` compiles one plan per single-GPU layout below (microbatch size and
count, activation recompute), weights zeroed so that each travels as a few
MB. `run` calibrates the GPU (`loom-run --calibrate --device cuda`) and
trains each plan (weights filled with GPT-2's initialization), writing the
cluster file, the median step of each and its time by kernel kind
(`--report`, profiles.txt) into DIR. `report` asks
`loom-plan --evaluate` for each layout's step on that calibrated cluster
and prints it beside the measured one (the issue's tolerance on a CPU is
15%; docs/design/planner.md). The measurements of 2026-11-27 on an H200
are in benchmarks/planner/h200-2026-11-27 (with each layout's time by
kernel kind), their calibration in examples/clusters/h200-calibrated.json:

    /usr/bin/python3 benchmarks/planner/gpu_accuracy.py report KIT \
        benchmarks/planner/h200-2026-11-27 \
        --cluster examples/clusters/h200-calibrated.json
"""
import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
GPT2 = os.path.join(ROOT, "benchmarks", "gpt2-cuda")

BATCH, SEQ, VOCAB = 8, 1024, 50257
LAYOUTS = [
    # (name, --evaluate, loom-run flags)
    ("mbs 8", "mbs=8,M=1,recompute=none", []),
    ("mbs 8, recompute", "mbs=8,M=1,recompute=full", ["--recompute", "full"]),
    ("mbs 4 x 2", "mbs=4,M=2,recompute=none", ["--grad-accum", "2"]),
    ("mbs 2 x 4", "mbs=2,M=4,recompute=none", ["--grad-accum", "4"]),
    ("mbs 1 x 8, recompute", "mbs=1,M=8,recompute=full",
     ["--grad-accum", "8", "--recompute", "full"]),
]


def slug(name):
    return "".join(c if c.isalnum() else "-" for c in name)


def sh(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=True, **kw)


def model_path(kit):
    # Beside the kit, not in it: it does not travel.
    return os.path.abspath(kit).rstrip("/") + ".model.onnx"


def make(args):
    import numpy as np
    os.makedirs(args.kit, exist_ok=True)
    onnx = model_path(args.kit)
    sh([sys.executable, os.path.join(GPT2, "export_gpt2.py"), onnx,
        "--batch", str(BATCH), "--seq", str(SEQ), "--vocab", str(VOCAB),
        "--dynamic-batch"])
    shape = os.path.join(args.kit, "shape.npy")
    np.save(shape, np.zeros((BATCH, SEQ), np.int64))
    for name, _, flags in LAYOUTS:
        plan = os.path.join(args.kit, slug(name) + ".plan")
        sh([args.loom_run, onnx, "--train", "--precision", "bf16",
            "--input", "idx=" + shape, "--labels", shape, "--batch-size",
            str(BATCH), "--optimizer", "adamw", "--lr", "1e-4", "--steps",
            "0", "--emit-plan", plan] + flags, stdout=subprocess.DEVNULL)
        with open(plan, "rb") as source, gzip.open(plan + ".gz", "wb",
                                                   compresslevel=1) as out:
            shutil.copyfileobj(source, out, 1 << 24)
        os.remove(plan)
    os.remove(shape)


def run(args):
    import numpy as np
    os.makedirs(args.out, exist_ok=True)
    cluster = os.path.join(args.out, "cluster.json")
    sh([args.loom_run, "--calibrate", cluster, "--device", "cuda",
        "--ranks", "1"])
    work = "/tmp/gpu-accuracy"
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(1)
    data = os.path.join(work, "idx.npy")
    np.save(data, rng.integers(0, VOCAB, (BATCH * 4, SEQ), dtype=np.int64))
    measured = {}
    for name, _, _ in LAYOUTS:
        plan = os.path.join(work, "model.plan")
        with gzip.open(os.path.join(args.kit, slug(name) + ".plan.gz"),
                       "rb") as source, open(plan, "wb") as out:
            shutil.copyfileobj(source, out, 1 << 24)
        sh([sys.executable, os.path.join(GPT2, "fill_weights.py"), plan])
        metrics = os.path.join(work, "metrics.jsonl")
        # The last step is timed kernel by kernel (--report: time by kernel
        # kind, into profiles.txt), so it is not one of the steps counted.
        done = sh([args.loom_run, plan, "--train", "--device", "cuda",
                   "--input", "idx=" + data, "--labels", data,
                   "--batch-size", str(BATCH), "--steps", str(args.steps + 1),
                   "--metrics", metrics, "--report"],
                  stdout=subprocess.PIPE, text=True)
        with open(os.path.join(args.out, "profiles.txt"), "a") as f:
            f.write(f"=== {name}\n{done.stdout}\n")
        with open(metrics) as f:
            steps = [json.loads(line)["step_ms"] for line in f if line.strip()]
        measured[name] = statistics.median(steps[args.warmup:-1])
        print(f"{name}: {measured[name]:.2f} ms per step", flush=True)
    with open(os.path.join(args.out, "measured.json"), "w") as f:
        json.dump(measured, f, indent=1)


def report(args):
    onnx = model_path(args.kit)
    if not os.path.exists(onnx):
        sh([sys.executable, os.path.join(GPT2, "export_gpt2.py"), onnx,
            "--batch", str(BATCH), "--seq", str(SEQ), "--vocab", str(VOCAB),
            "--dynamic-batch"])
    with open(os.path.join(args.results, "measured.json")) as f:
        measured = json.load(f)
    cluster = args.cluster or os.path.join(args.results, "cluster.json")
    with open(cluster) as f:
        print("cluster:", json.load(f)["name"])
    print(f"{'layout':24} {'predicted ms':>13} {'measured ms':>12} "
          f"{'error':>8}")
    worst = 0
    for name, evaluate, _ in LAYOUTS:
        out = os.path.join(tempfile.gettempdir(),
                           "gpu-accuracy-" + slug(name) + ".json")
        sh([args.loom_plan, onnx, "--cluster", cluster, "--devices", "1",
            "--global-batch", str(BATCH), "--precision", "bf16",
            "--evaluate", evaluate + ",zero=0", "--json", out],
           stdout=subprocess.DEVNULL)
        with open(out) as f:
            predicted = json.load(f)["predicted"]["step_s"] * 1e3
        error = predicted / measured[name] - 1
        worst = max(worst, abs(error))
        print(f"{name:24} {predicted:13.2f} {measured[name]:12.2f} "
              f"{error:+8.1%}")
    print(f"worst error {worst:.1%}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("kit")
    m.add_argument("--loom-run", default=os.path.join(ROOT, "build", "bin",
                                                      "loom-run"))
    r = sub.add_parser("run")
    r.add_argument("kit")
    r.add_argument("--loom-run", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--steps", type=int, default=10)
    r.add_argument("--warmup", type=int, default=3)
    e = sub.add_parser("report")
    e.add_argument("kit")
    e.add_argument("results")
    e.add_argument("--cluster", help="the cluster file (default: "
                   "RESULTS/cluster.json, the calibration of the run)")
    e.add_argument("--loom-plan", default=os.path.join(ROOT, "build", "bin",
                                                       "loom-plan"))
    args = p.parse_args()
    {"make": make, "run": run, "report": report}[args.command](args)


if __name__ == "__main__":
    main()
