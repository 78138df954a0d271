#!/usr/bin/env python3
"""Pipeline schedules side by side with the compiler's simulation.

Trains a GPT for a few steps with `loom-run --train --pp P --microbatches M`
under each schedule (gpipe, 1f1b, interleaved with 2 stages per rank,
zb-h1) and prints, per schedule, the measured median step time, the mean
measured bubble over the ranks (--report-json's bubble_fraction, from the
traced last step; the median of --repeats runs) and each rank's planned
and measured peak memory, next
to what loom-split-stages predicted before launch (the remark loom-run
prints: step time and bubble from the cost model's per-stage times, and
how many microbatches of activations each stage holds at most).

The cost model's rates are not calibrated for this machine (that is the
planner's issue), so its step time is an estimate of the shape, not of the
seconds; the bubble is the figure to compare.

On a machine with fewer cores than ranks, the ranks time-slice and the
bubble of one traced step moves by many points from run to run. `--emit
DIR` compiles the plans and keeps their predictions (made for ranks with
a core each) so that `--plans DIR` can run them where the cores are, on a
machine without MLIR (scripts/gpu-kit.sh, scripts/gpu-session.sh).
"""
import argparse
import gzip
import json
import os
import re
import statistics
import shutil
import subprocess
import sys

FILL_WEIGHTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                            "gpt2-cuda", "fill_weights.py")


PREDICTION = re.compile(
    r"remark: pipeline \S+ on \d+ ranks, \d+ microbatches[^(]*"
    r"\(cost model\): "
    r"step ([0-9.e+-]+) ms, bubble ([0-9.]+)% \(([0-9.]+)% between "
    r"[^)]*\); .*?: (.*)$", re.M)


def tag_of(schedule, extra):
    return schedule + ("-v2" if extra else "")


def prediction(stdout):
    """What loom-split-stages predicted, from loom-run's remark."""
    predicted = PREDICTION.search(stdout)
    if not predicted:
        sys.exit("no prediction in loom-run's output:\n" + stdout)
    return {
        "predicted_ms": float(predicted.group(1)),
        # The simulation's bubble measured as the trace measures it: each
        # rank from its first action to its last.
        "predicted_bubble": float(predicted.group(3)) / 100,
        "step_bubble": float(predicted.group(2)) / 100,
        "inflight": [int(m) for m in
                     re.findall(r"(?:^|\s)s\d+ [0-9.e/+-]+ ms, (\d+) x",
                                predicted.group(4))],
    }


def schedule_flags(args, schedule, extra):
    return ["--pp", str(args.pp), "--microbatches", str(args.microbatches),
            "--schedule", schedule] + extra


def emit(args, schedule, extra):
    """Compiles the schedule's plan into --emit and keeps the prediction
    beside it (no rank runs: the plan is for another machine, whose ranks
    have a core each)."""
    tag = tag_of(schedule, extra)
    cmd = [args.loom_run, args.model, "--train"] + schedule_flags(
        args, schedule, extra) + [
        "--input", "idx=" + args.idx, "--labels", args.labels,
        "--batch-size", str(args.batch), "--optimizer", "adamw", "--lr",
        "1e-3", "--steps", "0", "--emit-plan",
        os.path.join(args.emit, tag + ".plan")]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    with open(os.path.join(args.emit, tag + ".prediction.json"), "w") as f:
        json.dump(prediction(out.stdout), f)
    # Weights zeroed (layer norm scales one) so that the plan travels as a
    # few MB; --plans gives them GPT-2's initialization again.
    plan = os.path.join(args.emit, tag + ".plan")
    subprocess.run([sys.executable, FILL_WEIGHTS, plan, "--std", "0"],
                   check=True, capture_output=True)
    with open(plan, "rb") as source, gzip.open(plan + ".gz", "wb",
                                               compresslevel=1) as packed:
        shutil.copyfileobj(source, packed, 1 << 24)
    os.remove(plan)


def run(args, schedule, extra):
    tag = tag_of(schedule, extra)
    metrics = os.path.join(args.work, tag + ".jsonl")
    report = os.path.join(args.work, tag + ".json")
    if args.plans:
        # A plan made by --emit, unpacked once with its weights filled.
        plan = os.path.join(args.work, tag + ".plan")
        if not os.path.exists(plan):
            with gzip.open(os.path.join(args.plans, tag + ".plan.gz"),
                           "rb") as packed, open(plan, "wb") as out:
                shutil.copyfileobj(packed, out, 1 << 24)
            subprocess.run([sys.executable, FILL_WEIGHTS, plan], check=True,
                           capture_output=True)
        cmd = [args.loom_run, plan, "--train"]
    else:
        cmd = [args.loom_run, args.model, "--train"] + schedule_flags(
            args, schedule, extra)
    cmd += ["--input", "idx=" + args.idx, "--labels", args.labels,
            "--batch-size", str(args.batch), "--steps", str(args.steps),
            "--optimizer", "adamw", "--lr", "1e-3", "--metrics", metrics,
            "--report-json", report]
    if args.mpirun:
        cmd = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
               str(args.pp)] + cmd
    else:
        cmd += ["--ranks", str(args.pp)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    if args.plans:
        with open(os.path.join(args.plans, tag + ".prediction.json")) as f:
            predicted = json.load(f)
    else:
        predicted = prediction(out.stdout)
    steps = [json.loads(line)["step_ms"] for line in open(metrics)]
    ranks = json.load(open(report))["ranks"]
    return dict(predicted, **{
        "name": schedule + (" (V=2)" if extra else ""),
        "step_ms": statistics.median(steps[1:] or steps),
        "bubble": statistics.mean(r.get("bubble_fraction", 0) for r in ranks),
        "planned": [r["planned_peak_bytes"] for r in ranks],
        "measured": [r["measured_peak_bytes"] for r in ranks],
    })


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--loom-run", required=True)
    p.add_argument("--model", help="the ONNX model (not with --plans)")
    p.add_argument("--emit", metavar="DIR",
                   help="only compile each schedule's plan into DIR, with "
                   "its prediction, for a machine without MLIR")
    p.add_argument("--plans", metavar="DIR",
                   help="run the plans --emit made instead of compiling")
    p.add_argument("--idx", required=True)
    p.add_argument("--labels", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--pp", type=int, default=4)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--mpirun", default="")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    if not args.plans and not args.model:
        p.error("--model is needed unless --plans runs plans made by --emit")
    os.makedirs(args.work, exist_ok=True)
    # The measured bubble comes from one traced step; on a shared machine
    # it moves by several points from run to run, so each schedule runs
    # --repeats times (interleaved with the others) and the medians count.
    schedules = [("gpipe", []), ("1f1b", []),
                 ("interleaved", ["--virtual-stages", "2"]), ("zb-h1", [])]
    if args.emit:
        os.makedirs(args.emit, exist_ok=True)
        for schedule, extra in schedules:
            emit(args, schedule, extra)
        return 0
    runs = [[] for _ in schedules]
    for _ in range(args.repeats):
        for index, (schedule, extra) in enumerate(schedules):
            runs[index].append(run(args, schedule, extra))
    rows = []
    for repeats in runs:
        row = dict(repeats[0])
        row["bubbles"] = [r["bubble"] for r in repeats]
        row["bubble"] = statistics.median(row["bubbles"])
        row["step_ms"] = statistics.median(r["step_ms"] for r in repeats)
        rows.append(row)
    mib = 1 << 20
    print(f"{'schedule':<18}{'step ms':>9}{'(model)':>9}{'bubble':>9}"
          f"{'(sim.)':>8}   per rank: planned/measured peak MiB "
          f"[simulated in-flight microbatches per stage]")
    for r in rows:
        peaks = " ".join(f"{a / mib:.2f}/{b / mib:.2f}"
                         for a, b in zip(r["planned"], r["measured"]))
        print(f"{r['name']:<18}{r['step_ms']:>9.1f}{r['predicted_ms']:>9.2f}"
              f"{r['bubble'] * 100:>8.1f}%{r['predicted_bubble'] * 100:>7.1f}%"
              f"   {peaks} {r['inflight']}")
    worst = max(abs(a - b) / b for r in rows
                for a, b in zip(r["planned"], r["measured"]) if b)
    print(f"planned vs measured peak: largest difference {worst * 100:.1f}%")
    gap = max(abs(r["bubble"] - r["predicted_bubble"]) for r in rows)
    print(f"bubble: measured (median of {args.repeats} runs: " +
          "; ".join(r["name"] + " " + ", ".join(f"{b * 100:.1f}"
                                                 for b in r["bubbles"])
                    for r in rows) +
          ") vs simulated, each rank from its first action to its last: "
          f"largest difference {gap * 100:.1f} points")


if __name__ == "__main__":
    sys.exit(main())
