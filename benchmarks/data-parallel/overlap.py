#!/usr/bin/env python3
"""How much of a data-parallel step's gradient communication the backward
pass hides, from `loom-run --trace` and `--metrics`:

    overlap.py --trace T.json --metrics M.jsonl --name NAME [--skip 2]

Prints one line: NAME, the median step time (ms, after --skip steps), the
number of all-reduces of the traced step, the wall time during which at
least one of them was in flight on rank 0 (ms; posting to completion, for
MPI to the executor's wait), and the fraction of that time during which
rank 0's compute track was busy: the communication hidden behind compute.
"""
import argparse
import json
import statistics


def union(intervals):
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def covered(start, end, busy):
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in busy)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trace", required=True)
    parser.add_argument("--metrics", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--skip", type=int, default=2)
    args = parser.parse_args()
    with open(args.metrics) as f:
        steps = [json.loads(line)["step_ms"] for line in f if line.strip()]
    step_ms = statistics.median(steps[args.skip:] or steps)
    with open(args.trace) as f:
        events = [e for e in json.load(f)["traceEvents"]
                  if e["ph"] == "X" and e["pid"] == 0]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in events
            if e["tid"] == 1 and e["name"].startswith("all_reduce")]
    busy = union((e["ts"], e["ts"] + e["dur"]) for e in events
                 if e["tid"] == 0)
    flight = union(comm)
    total = sum(end - start for start, end in flight)
    hidden = sum(covered(start, end, busy) for start, end in flight)
    print("   %-22s %9.1f ms/step %4d all-reduces %9.2f ms in flight, "
          "%5.1f%% hidden behind compute" %
          (args.name, step_ms, len(comm), total / 1e3,
           100.0 * hidden / total if total else 0.0))


if __name__ == "__main__":
    main()
