"""Checks a data-parallel run's loom-run --report-json against ZeRO's
accounting for plain data parallelism (no ZeRO stage):

    check_dp_report.py REPORT.json --dp N [--optimizer-slots K]

For every rank: the gradients take what the parameters take (grad_bytes ==
param_bytes = 4 Psi for f32), the optimizer state K times that plus the
8-byte step count (AdamW: K = 2), the step sends 2(N-1)/N of the
gradients and of the 4-byte loss in all-reduces (ring-counted) and nothing
else, and the planned peak is within 2% of the measured one. Prints one
line per rank and "all ranks ok", or what differs (exit 1).
"""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--dp", type=int, required=True)
    parser.add_argument("--optimizer-slots", type=int, default=2)
    args = parser.parse_args()
    with open(args.report) as f:
        ranks = json.load(f)["ranks"]
    n = args.dp
    ok = True
    for row in ranks:
        problems = []
        params = row["param_bytes"]
        if row["grad_bytes"] != params:
            problems.append("grad_bytes %d != param_bytes %d" %
                            (row["grad_bytes"], params))
        optimizer = args.optimizer_slots * params + 8
        if row["optimizer_bytes"] != optimizer:
            problems.append("optimizer_bytes %d != %d" %
                            (row["optimizer_bytes"], optimizer))
        expected = round(2 * (n - 1) / n * (params + 4))
        comm = row["comm_bytes"]
        if abs(comm.get("all_reduce", 0) - expected) > 1:
            problems.append("all_reduce sends %d, not 2(N-1)/N (4 Psi + 4) = %d"
                            % (comm.get("all_reduce", 0), expected))
        others = {k: v for k, v in comm.items() if k != "all_reduce" and v}
        if others:
            problems.append("other collectives: %s" % others)
        planned, measured = row["planned_peak_bytes"], row["measured_peak_bytes"]
        if abs(planned - measured) > 0.02 * measured:
            problems.append("planned peak %d is not within 2%% of measured %d"
                            % (planned, measured))
        print("rank %d: %s" % (row["rank"], "; ".join(problems) or
                               "ok (Psi = %d, all_reduce %d bytes)" %
                               (params // 4, expected)))
        ok &= not problems
    print("all ranks ok" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
