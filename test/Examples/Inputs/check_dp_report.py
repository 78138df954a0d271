"""Checks a data-parallel run's loom-run --report-json against ZeRO's
accounting (arXiv 1910.02054):

    check_dp_report.py REPORT.json --dp N [--zero 0|1] [--optimizer-slots K]

For every rank: the gradients take what the parameters take (grad_bytes ==
param_bytes = 4 Psi for f32); the optimizer state K times that (AdamW:
K = 2), divided by N with --zero 1, plus the 8-byte step count; the step
sends 2(N-1)/N of the gradients: in all-reduces without ZeRO, with ZeRO-1
(N-1)/N in reduce-scatters and (N-1)/N in all-gathers of the parameters;
plus an all-reduce of the 4-byte loss, nothing else (ring-counted); the
planned peak is within 2% of the measured one. Prints one line per rank
and "all ranks ok", or what differs (exit 1).
"""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--dp", type=int, required=True)
    parser.add_argument("--zero", type=int, default=0)
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
        optimizer = args.optimizer_slots * params // (n if args.zero else 1) + 8
        if row["optimizer_bytes"] != optimizer:
            problems.append("optimizer_bytes %d != %d" %
                            (row["optimizer_bytes"], optimizer))
        comm = row["comm_bytes"]
        wanted = {}
        if args.zero:
            wanted["all_reduce"] = round(2 * (n - 1) / n * 4)
            wanted["reduce_scatter"] = round((n - 1) / n * params)
            wanted["all_gather"] = round((n - 1) / n * params)
        else:
            wanted["all_reduce"] = round(2 * (n - 1) / n * (params + 4))
        for kind, expected in wanted.items():
            if abs(comm.get(kind, 0) - expected) > 1:
                problems.append("%s sends %d, not %d" %
                                (kind, comm.get(kind, 0), expected))
        expected = sum(wanted.values())
        others = {k: v for k, v in comm.items() if k not in wanted and v}
        if others:
            problems.append("other collectives: %s" % others)
        planned, measured = row["planned_peak_bytes"], row["measured_peak_bytes"]
        if abs(planned - measured) > 0.02 * measured:
            problems.append("planned peak %d is not within 2%% of measured %d"
                            % (planned, measured))
        print("rank %d: %s" % (row["rank"], "; ".join(problems) or
                               "ok (Psi = %d, %d bytes sent)" %
                               (params // 4, expected)))
        ok &= not problems
    print("all ranks ok" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
