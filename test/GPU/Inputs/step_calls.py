"""Prints the per-step difference of two LOOM_EMULATOR_STATS reports (1 and
3 steps): what one more training step costs in runtime API calls."""
import re
import sys


def counts(path):
    found = {}
    for line in open(path):
        match = re.match(r"\s+(.*?)\s+(\d+)$", line)
        if match:
            found[match.group(1)] = int(match.group(2))
    if not found:
        sys.exit("no LOOM_EMULATOR_STATS report in " + path)
    return found


one, three = counts(sys.argv[1]), counts(sys.argv[2])
step = {name: (three[name] - one[name]) / 2 for name in one}
print("per step: %g kernel launches, %g matmuls, %g allocations, %g frees, "
      "%g synchronizations, %g graph launches" %
      (step["kernel launches"], step["cuBLASLt matmuls"],
       step["cudaMalloc/cudaMallocHost"], step["frees"],
       step["host synchronizations"], step["CUDA graph launches"]))
