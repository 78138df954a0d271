#!/usr/bin/env python3
"""Planning time on Megatron-LM's Table 1 models, beside Alpa's search cost.

    /usr/bin/python3 benchmarks/planner/search_time.py [--build build]
        [--rows 1.7B,7.5B,...] [--limit SECONDS] [--no-search]

For each row of Megatron-LM's Table 1 (2104.04473; the 1T row included) the
GPT of that shape (benchmarks/tensor-parallel/bench.py shapes-only-gpt:
vocabulary 51200, sequence 2048, shapes only) on
examples/clusters/megatron-a100-cluster.json, bf16, microbatches of one
sequence:

- `evaluate`: `loom-plan --evaluate` of Megatron's layout (tp, pp, dp, 1F1B,
  full recompute): seconds, and the predicted TFLOP/s per GPU beside
  Megatron's measured figure;
- `search`: the planner's own search (`--evaluate recompute=full,mbs=1`,
  everything else searched) under `--time-limit`: seconds, layouts
  compiled and pruned, whether it finished, its choice and prediction.

Then Alpa's case (GPT-39B on 64 GPUs, global batch 1024), whose search
Alpa reports at about 40 minutes (Zheng et al. 2022, section 8.5). Prints
one table; the issue's target is under 5 s for any row.
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
# name: (heads, hidden, layers, tp, pp, GPUs, global batch, TFLOP/s)
MEGATRON = {
    "1.7B": (24, 2304, 24, 1, 1, 32, 512, 137),
    "3.6B": (32, 3072, 30, 2, 1, 64, 512, 138),
    "7.5B": (32, 4096, 36, 4, 1, 128, 512, 142),
    "18.4B": (48, 6144, 40, 8, 1, 256, 1024, 135),
    "39.1B": (64, 8192, 48, 8, 2, 512, 1536, 138),
    "76.1B": (80, 10240, 60, 8, 4, 1024, 1792, 140),
    "145.6B": (96, 12288, 80, 8, 8, 1536, 2304, 148),
    "310.1B": (128, 16384, 96, 8, 16, 1920, 2160, 155),
    "529.6B": (128, 20480, 105, 8, 35, 2520, 2520, 163),
    "1008B": (160, 25600, 128, 8, 64, 3072, 3072, 163),
}
ALPA = ("39.1B", 64, 1024, 40 * 60)  # model, GPUs, batch, search seconds


def model_path(work, name):
    heads, hidden, layers = MEGATRON[name][:3]
    path = os.path.join(work, f"gpt-{name}.onnx")
    if not os.path.exists(path):
        subprocess.run(
            [sys.executable, os.path.join(ROOT, "benchmarks",
                                          "tensor-parallel", "bench.py"),
             "shapes-only-gpt", "--out", path, "--layers", str(layers),
             "--embd", str(hidden), "--heads", str(heads), "--vocab",
             "51200", "--seq", "2048"],
            capture_output=True, text=True, check=True)
    return path


def plan(loom_plan, model, gpus, batch, evaluate, limit, work):
    out = os.path.join(work, "plan.json")
    if os.path.exists(out):
        os.remove(out)
    cluster = os.path.join(ROOT, "examples", "clusters",
                           "megatron-a100-cluster.json")
    command = [loom_plan, model, "--cluster", cluster, "--devices",
               str(gpus), "--global-batch", str(batch), "--precision",
               "bf16", "--evaluate", evaluate, "--json", out]
    if limit:
        command += ["--time-limit", str(limit)]
    started = time.time()
    run = subprocess.run(command, capture_output=True, text=True)
    seconds = time.time() - started
    result = json.load(open(out)) if os.path.exists(out) else None
    if result is None:
        return seconds, None, (run.stderr or run.stdout).strip()[:200]
    return seconds, result, ""


def describe(result, why):
    if result is None:
        return f"error: {why}"
    if not result.get("choice"):
        first = (result.get("alternatives") or [{}])[0]
        reason = first.get("predicted", {}).get("reason", "")
        return f"nothing fits ({reason[:70]})"
    c, p = result["choice"], result["predicted"]
    layout = (f"dp{c['dp']} tp{c['tp']} pp{c['pp']} z{c['zero']}"
              f"{' sp' if c['sequence_parallel'] else ''} M{c['microbatches']}"
              f"{' ' + c['schedule'] if c['pp'] > 1 else ''}")
    return f"{layout}: {p['tflops_per_device']:.1f} TFLOP/s"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--rows", default=",".join(MEGATRON))
    p.add_argument("--limit", type=float, default=300,
                   help="--time-limit of each search, seconds")
    p.add_argument("--no-search", action="store_true",
                   help="only --evaluate Megatron's layouts")
    args = p.parse_args()
    loom_plan = os.path.join(args.build, "bin", "loom-plan")
    work = tempfile.mkdtemp(prefix="loom-search-time.")
    print(f"{'row':>7} {'GPUs':>5} {'mode':>9} {'seconds':>8} "
          f"{'layouts':>13}  result (Megatron measured)")
    for name in args.rows.split(","):
        heads, hidden, layers, tp, pp, gpus, batch, tflops = MEGATRON[name]
        model = model_path(work, name)
        dp = gpus // tp // pp
        schedule = ",schedule=1f1b" if pp > 1 else ""
        # Megatron's layout as 2104.04473 ran it: no ZeRO (its distributed
        # optimizer came later) and no sequence parallelism (2205.05198).
        modes = [("evaluate", f"tp={tp},pp={pp},dp={dp}{schedule},mbs=1,"
                  "recompute=full,zero=0,sp=0", 0)]
        if not args.no_search:
            modes.append(("search", "mbs=1,recompute=full", args.limit))
        for mode, evaluate, limit in modes:
            seconds, result, why = plan(loom_plan, model, gpus, batch,
                                        evaluate, limit, work)
            layouts = "" if result is None else (
                f"{result['compiled']} (+{len(result['pruned'])})")
            stopped = result is not None and result["stopped_at_time_limit"]
            print(f"{name:>7} {gpus:>5} {mode:>9} {seconds:>8.1f} "
                  f"{layouts:>13}  {describe(result, why)} ({tflops})"
                  f"{'; stopped at the limit' if stopped else ''}",
                  flush=True)
    model_name, gpus, batch, alpa_seconds = ALPA
    if args.no_search:
        return
    seconds, result, why = plan(loom_plan, model_path(work, model_name), gpus,
                                batch, "mbs=1", args.limit, work)
    stopped = result is not None and result["stopped_at_time_limit"]
    print(f"\nAlpa's case, GPT-39B on {gpus} GPUs, batch {batch}: Loom "
          f"{seconds:.1f} s ({describe(result, why)}"
          f"{'; stopped at the limit' if stopped else ''}), Alpa about "
          f"{alpa_seconds / 60:.0f} min")


if __name__ == "__main__":
    main()
