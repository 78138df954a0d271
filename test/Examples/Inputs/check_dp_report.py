"""Checks a data-parallel run's loom-run --report-json against ZeRO's
accounting (arXiv 1910.02054), in f32 (4 bytes per element):

    check_dp_report.py REPORT.json --dp D [--zero 0|1|2|3]
        [--shard-group N] [--baseline BASE.json] [--optimizer-slots K]
        [--planned-for RUN.json]

Psi is the trained parameters' element count, taken from --baseline (a
report of the same model without ZeRO) when given, else from the report's
own param_bytes (stages 0 to 2 hold whole parameters). ZeRO shards over N
ranks (--shard-group, default D) and the D / N groups replicate (hybrid
sharding). Per rank, the model states are:

    stage 0: params 4 Psi, gradients 4 Psi, optimizer K 4 Psi + 8
    stage 1: params 4 Psi, gradients 4 Psi, optimizer K 4 Psi / N + 8
    stage 2: params 4 Psi, gradients 4 Psi / N, optimizer K 4 Psi / N + 8
    stage 3: params 4 Psi / N, gradients 4 Psi / N, optimizer K 4 Psi / N + 8

(AdamW: K = 2; the 8 bytes are the step count). A step sends, ring-
counted: without ZeRO all-reduces of 2(D-1)/D of the gradients; with ZeRO
(N-1)/N of the gradients in reduce-scatters, (N-1)/N of the parameters in
all-gathers (stage 3: from once to three times that, each parameter
gathered for every op that reads it), and with replicas 2(G-1)/G of the
gradient shards in all-reduces; plus an all-reduce of the 4-byte loss,
nothing else. The planned peak is within 2% of the measured one. Prints one
line per rank and "all ranks ok", or what differs (exit 1).

With --planned-for RUN.json, REPORT.json is `loom-run --compile-only
--report-json`'s (nothing ran: its measured peak is 0) and must equal the
report of the run RUN.json in every other figure: what the compiler plans
is what the run holds and sends.
"""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--dp", type=int, required=True)
    parser.add_argument("--zero", type=int, default=0)
    parser.add_argument("--shard-group", type=int, default=0)
    parser.add_argument("--baseline")
    parser.add_argument("--optimizer-slots", type=int, default=2)
    parser.add_argument("--planned-for")
    args = parser.parse_args()
    ran = None
    if args.planned_for:
        with open(args.planned_for) as f:
            ran = {row["rank"]: row for row in json.load(f)["ranks"]}
    with open(args.report) as f:
        ranks = json.load(f)["ranks"]
    full = None
    if args.baseline:
        with open(args.baseline) as f:
            full = json.load(f)["ranks"][0]["param_bytes"]
    d = args.dp
    n = args.shard_group or d
    replicas = d // n
    stage = args.zero
    ok = True
    for row in ranks:
        problems = []
        params = full if full is not None else row["param_bytes"]
        sharded = params // n
        wanted_bytes = {
            "param_bytes": sharded if stage >= 3 else params,
            "grad_bytes": sharded if stage >= 2 else params,
            "optimizer_bytes": args.optimizer_slots *
            (sharded if stage >= 1 else params) + 8,
        }
        for key, expected in wanted_bytes.items():
            if row[key] != expected:
                problems.append("%s %d != %d" % (key, row[key], expected))
        comm = row["comm_bytes"]
        loss = 2 * (d - 1) / d * 4
        wanted = {}
        gathered = None
        if stage:
            wanted["reduce_scatter"] = round((n - 1) / n * params)
            wanted["all_reduce"] = round(loss + 2 * (replicas - 1) /
                                         replicas * sharded)
            once = (n - 1) / n * params
            if stage < 3:
                wanted["all_gather"] = round(once)
            else:
                gathered = comm.get("all_gather", 0)
                if not once < gathered <= 3 * once + 1:
                    problems.append("all_gather sends %d, not in (%d, %d]" %
                                    (gathered, once, 3 * once))
        else:
            wanted["all_reduce"] = round(2 * (d - 1) / d * (params + 4))
        for kind, expected in wanted.items():
            if abs(comm.get(kind, 0) - expected) > 1:
                problems.append("%s sends %d, not %d" %
                                (kind, comm.get(kind, 0), expected))
        expected = sum(wanted.values()) + (gathered or 0)
        others = {k: v for k, v in comm.items()
                  if k not in wanted and k != "all_gather" and v}
        if others:
            problems.append("other collectives: %s" % others)
        planned, measured = row["planned_peak_bytes"], row["measured_peak_bytes"]
        if ran is not None:
            other = ran.get(row["rank"], {})
            if measured != 0:
                problems.append("a plan measures nothing, not %d" % measured)
            for key in row:
                if key != "measured_peak_bytes" and row[key] != other.get(key):
                    problems.append("planned %s %s, the run's %s" %
                                    (key, row[key], other.get(key)))
        elif abs(planned - measured) > 0.02 * measured:
            problems.append("planned peak %d is not within 2%% of measured %d"
                            % (planned, measured))
        summary = "ok (Psi = %d, %d bytes sent" % (params // 4, expected)
        if gathered is not None:
            summary += ", parameters gathered %.2f times" % (
                gathered / ((n - 1) / n * params))
        print("rank %d: %s" % (row["rank"], "; ".join(problems) or
                               summary + ")"))
        ok &= not problems
    print("all ranks ok" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
