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
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def run(args, schedule, extra):
    tag = schedule + ("-v2" if extra else "")
    metrics = os.path.join(args.work, tag + ".jsonl")
    report = os.path.join(args.work, tag + ".json")
    cmd = [args.loom_run, args.model, "--train", "--pp", str(args.pp),
           "--microbatches", str(args.microbatches), "--schedule", schedule,
           "--input", "idx=" + args.idx, "--labels", args.labels,
           "--batch-size", str(args.batch), "--steps", str(args.steps),
           "--optimizer", "adamw", "--lr", "1e-3", "--metrics", metrics,
           "--report-json", report] + extra
    if args.mpirun:
        cmd = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "-np",
               str(args.pp)] + cmd
    else:
        cmd += ["--ranks", str(args.pp)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    predicted = re.search(
        r"remark: pipeline \S+ on \d+ ranks, \d+ microbatches[^(]*"
        r"\(cost model\): "
        r"step ([0-9.e+-]+) ms, bubble ([0-9.]+)% \(([0-9.]+)% between "
        r"[^)]*\); .*?: (.*)$",
        out.stdout, re.M)
    if not predicted:
        sys.exit("no prediction in loom-run's output:\n" + out.stdout)
    inflight = [int(m) for m in
                re.findall(r"(?:^|\s)s\d+ [0-9.e/+-]+ ms, (\d+) x",
                           predicted.group(4))]
    steps = [json.loads(line)["step_ms"] for line in open(metrics)]
    ranks = json.load(open(report))["ranks"]
    return {
        "name": schedule + (" (V=2)" if extra else ""),
        "step_ms": statistics.median(steps[1:] or steps),
        "predicted_ms": float(predicted.group(1)),
        "bubble": statistics.mean(r.get("bubble_fraction", 0) for r in ranks),
        # The simulation's bubble measured as the trace measures it: each
        # rank from its first action to its last.
        "predicted_bubble": float(predicted.group(3)) / 100,
        "step_bubble": float(predicted.group(2)) / 100,
        "inflight": inflight,
        "planned": [r["planned_peak_bytes"] for r in ranks],
        "measured": [r["measured_peak_bytes"] for r in ranks],
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--loom-run", required=True)
    p.add_argument("--model", required=True)
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
    # The measured bubble comes from one traced step; on a shared machine
    # it moves by several points from run to run, so each schedule runs
    # --repeats times (interleaved with the others) and the medians count.
    schedules = [("gpipe", []), ("1f1b", []),
                 ("interleaved", ["--virtual-stages", "2"]), ("zb-h1", [])]
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
