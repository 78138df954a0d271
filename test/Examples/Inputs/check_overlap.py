"""Checks a loom-run --trace for communication in flight during compute:

    check_overlap.py TRACE.json --ranks N [--kind all_reduce] [--any-rank]

For every rank: its collectives of KIND (the communication track) and the
kernels (the compute track) that started while one of them was in flight
(after it was posted, before it completed). Prints one line per rank and
"overlap on every rank" when each rank has a collective in flight during at
least one kernel, else what is missing (exit 1). With --any-rank, one rank
suffices ("overlap on some rank"): thread ranks time-sliced on fewer cores
than ranks may run one rank so far behind that its collectives find the
other's already posted and complete before its next kernel starts.
"""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("trace")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--kind", default="all_reduce")
    parser.add_argument("--any-rank", action="store_true")
    args = parser.parse_args()
    with open(args.trace) as f:
        events = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
    ok, some = True, False
    for rank in range(args.ranks):
        comm = [e for e in events if e["pid"] == rank and e["tid"] == 1
                and e["name"].split()[0] == args.kind]
        compute = [e for e in events if e["pid"] == rank and e["tid"] == 0]
        overlapped, kernels = 0, set()
        for c in comm:
            start, end = c["ts"], c["ts"] + c["dur"]
            inside = [k["args"]["index"] for k in compute
                      if start < k["ts"] < end]
            overlapped += bool(inside)
            kernels.update(inside)
        print("rank %d: %d %s, %d in flight while %d kernels started" %
              (rank, len(comm), args.kind, overlapped, len(kernels)))
        ok &= overlapped > 0 and len(compute) > 0
        some |= overlapped > 0 and len(compute) > 0
    if args.any_rank:
        print("overlap on some rank" if some else "NO OVERLAP")
        return 0 if some else 1
    print("overlap on every rank" if ok else "NO OVERLAP")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
