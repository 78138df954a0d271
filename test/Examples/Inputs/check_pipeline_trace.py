#!/usr/bin/env python3
"""Reads a pipelined run's --trace and --report-json.

    check_pipeline_trace.py TRACE.json REPORT.json

Prints, per rank, the actions of its "pipeline" track in the order they
ran, its measured bubble_fraction, and whether its planned and measured
peak memory agree within 2%.
"""
import json
import sys


def main():
    trace = json.load(open(sys.argv[1]))["traceEvents"]
    ranks = json.load(open(sys.argv[2]))["ranks"]
    for usage in ranks:
        rank = usage["rank"]
        slices = sorted((e for e in trace if e.get("cat") == "pipeline" and
                         e["pid"] == rank), key=lambda e: e["ts"])
        names = [e["name"] for e in slices]
        bubble = usage.get("bubble_fraction")
        print(f"rank {rank}: {len(names)} actions: {', '.join(names)}")
        ok = bubble is not None and 0 <= bubble < 1
        print(f"rank {rank}: bubble {'measured' if ok else 'MISSING'}")
        planned, measured = usage["planned_peak_bytes"], usage["measured_peak_bytes"]
        close = measured > 0 and abs(planned - measured) <= 0.02 * measured
        print(f"rank {rank}: planned peak {'within 2%' if close else 'MISMATCH'}"
              f" of measured ({planned} vs {measured})")


if __name__ == "__main__":
    main()
