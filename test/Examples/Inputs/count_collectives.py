"""Counts the collectives of a partitioned module (loom-run --emit-mlir):
one line per kind, reduction and local operand type, sorted, with the
count first."""
import collections
import re
import sys

PATTERN = re.compile(
    r"loom\.(all_reduce|all_gather|reduce_scatter|all_to_all|"
    r"collective_broadcast)\s+(sum|max|avg)?\s*%[\w#]+.*:\s*(tensor<[^>]*>)")

counts = collections.Counter()
with open(sys.argv[1]) as module:
    for line in module:
        match = PATTERN.search(line)
        if match:
            kind, reduction, type_ = match.groups()
            counts[(kind, reduction or "-", type_)] += 1
for (kind, reduction, type_), count in sorted(counts.items()):
    print(f"{count} {kind} {reduction} {type_}")
