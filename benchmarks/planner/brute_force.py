#!/usr/bin/env python3
"""The planner's search against brute force on small models.

    /usr/bin/python3 benchmarks/planner/brute_force.py [--build build]
        [--models gpt,llama,bert,neox,static] [--devices 2,4]
        [--batches 4,8,16]

For each model (the test GPT of benchmarks/cpu-training/bench.py, with a
symbolic batch; examples/zoo's LLaMA, BERT and GPT-NeoX exported at a fixed
batch of 2 rows; test/Examples/Inputs/train_reference.py's GPT at a fixed
batch of 4), device count and global batch, on
examples/clusters/this-machine.json widened to 4 devices per node: the
default search (screening, docs/design/planner.md) and `--exhaustive` (every
layout compiled). Prints one row each: both choices, their predicted steps,
the layouts each compiled and whether the search chose the brute force's
layout (or one predicted as fast); then the count. Exits 1 when one
differs. Takes a few minutes on two cores.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PYTHON = "/usr/bin/python3"


def layout(choice):
    keys = ["dp", "tp", "pp", "zero", "sequence_parallel", "microbatch_size",
            "microbatches", "schedule", "virtual_stages", "recompute"]
    short = {"sequence_parallel": "sp", "microbatch_size": "mbs",
             "microbatches": "M", "virtual_stages": "V"}
    parts = []
    for key in keys:
        value = choice.get(key)
        if value in (None, "", "none") or (key == "virtual_stages" and
                                           value == 1):
            continue
        if isinstance(value, bool):
            value = int(value)
        parts.append(str(value) if key in ("schedule", "recompute") else
                     f"{short.get(key, key)}{value}")
    return " ".join(parts)


def models(work, build, wanted):
    """name -> (onnx path, extra loom-plan flags)."""
    out = {}
    if "gpt" in wanted:
        d = os.path.join(work, "gpt")
        subprocess.run([PYTHON, os.path.join(ROOT, "benchmarks",
                                             "cpu-training", "bench.py"),
                        "prepare", "--dir", d, "--model", "gpt", "--vocab",
                        "64", "--block-size", "16", "--layers", "2",
                        "--heads", "2", "--embd", "32", "--seed", "0",
                        "--batch", "8", "--seq", "16"],
                       check=True, capture_output=True)
        out["gpt"] = (os.path.join(d, "gpt.onnx"), ["--dim", "seq=16"])
    zoo = [f for f in ("llama", "bert", "neox") if f in wanted]
    if zoo:
        d = os.path.join(work, "zoo")
        subprocess.run([PYTHON, os.path.join(ROOT, "examples", "zoo",
                                             "zoo.py"), d, "--loom-run",
                        os.path.join(build, "bin", "loom-run"),
                        "--families", ",".join(zoo), "--opsets", "17"],
                       check=True, capture_output=True)
        for family in zoo:
            out[family] = (os.path.join(d, f"{family}-o17", "model.onnx"), [])
    if "static" in wanted:
        d = os.path.join(work, "static")
        subprocess.run([PYTHON, os.path.join(ROOT, "test", "Examples",
                                             "Inputs", "train_reference.py"),
                        "gpt", d, "--optimizer", "adamw", "--steps", "1",
                        "--batch-size", "4"], check=True,
                       capture_output=True)
        out["static"] = (os.path.join(d, "model.onnx"), [])
    return out


def plan(loom_plan, model, flags, cluster, devices, batch, exhaustive, out):
    cmd = [loom_plan, model, "--cluster", cluster, "--devices", str(devices),
           "--global-batch", str(batch), "--json", out] + flags
    if exhaustive:
        cmd.append("--exhaustive")
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        return None, run.stderr.strip().splitlines()[-1:]
    return json.load(open(out)), None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--models", default="gpt,llama,bert,neox,static")
    p.add_argument("--devices", default="2,4")
    p.add_argument("--batches", default="4,8,16")
    args = p.parse_args()
    loom_plan = os.path.join(args.build, "bin", "loom-plan")
    work = tempfile.mkdtemp(prefix="loom-brute-force.")
    cluster = os.path.join(work, "four.json")
    spec = json.load(open(os.path.join(ROOT, "examples", "clusters",
                                       "this-machine.json")))
    spec["devices_per_node"] = 4
    json.dump(spec, open(cluster, "w"))
    found = models(work, args.build, args.models.split(","))
    print(f"{'model':7} {'dev':>3} {'B':>3}  {'search (compiled)':44} "
          f"{'brute force (compiled)':44} same")
    same = total = 0
    for name, (model, flags) in found.items():
        for devices in map(int, args.devices.split(",")):
            for batch in map(int, args.batches.split(",")):
                a, why = plan(loom_plan, model, flags, cluster, devices,
                              batch, False, os.path.join(work, "a.json"))
                b, why_b = plan(loom_plan, model, flags, cluster, devices,
                                batch, True, os.path.join(work, "b.json"))
                if a is None or b is None:
                    print(f"{name:7} {devices:>3} {batch:>3}  no plan: "
                          f"{(why or why_b)}")
                    continue
                total += 1
                ok = a["choice"] == b["choice"] or \
                    a["predicted"]["step_s"] <= b["predicted"]["step_s"]
                same += ok
                left = (f"{layout(a['choice'])} "
                        f"{a['predicted']['step_s'] * 1e3:.2f} ms "
                        f"({a['compiled']})")
                right = (f"{layout(b['choice'])} "
                         f"{b['predicted']['step_s'] * 1e3:.2f} ms "
                         f"({b['compiled']})")
                print(f"{name:7} {devices:>3} {batch:>3}  {left:44} "
                      f"{right:44} {'yes' if ok else 'NO'}", flush=True)
    print(f"the search chose the brute force's layout (or one as fast) in "
          f"{same} of {total} searches")
    return 0 if same == total else 1


if __name__ == "__main__":
    sys.exit(main())
