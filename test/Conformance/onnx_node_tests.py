#!/usr/bin/python3
"""Runs ONNX's backend node tests through `loom-run` and checks the results.

Usage:
  onnx_node_tests.py --loom-run build/bin/loom-run [--data DIR]
      [--exclusions FILE] [--filter REGEX] [-j N] [--keep-dir DIR]
      [--verbose] [--run-with BIN --device cuda]

ONNX ships one directory per node test (Debian: libonnx-testdata, under
/usr/include/onnx/backend/test/data/node/test_*), each with a model.onnx and
test_data_set_N/{input_K.pb, output_K.pb}. A test is *applicable* when every
node of its graph has an op type the Loom importer registers (SUPPORTED_OPS
below); the others are not counted at all. Each data set of an applicable test
is run as

  loom-run model.onnx --input NAME=input_K.pb ... --output-dir TMP

Loom reads shape-like operands (Reshape's shape, Slice's starts/ends/axes/
steps, Squeeze/Unsqueeze/ReduceSum axes, Split sizes, Expand and
ConstantOfShape shapes, Dropout's ratio and training_mode) as compile-time
constants; when a test passes one of them as a graph input, the data set's
value is folded into a copy of the model as an initializer and that copy is
run instead (--keep-dir keeps it for a repro). Likewise an optional output
Loom does not produce (UNSUPPORTED_OUTPUTS; none today) is dropped from the
copy and not compared. Every output_K.pb is compared with
TMP/<output name>.npy (npy_name: loom-run's escaping): the same shape, the same dtype, floats within
rtol=1e-3, atol=1e-7 (the ONNX backend test defaults; NaN matches NaN),
integers and booleans exactly.

Tests listed in the exclusions file (default: onnx_node_exclusions.txt next to
this script; lines `test_name: reason`, `#` starts a comment) are run too, but
are expected to fail. The script prints a line per op type (a test's op type
is the one op type of its graph apart from Constant; the expanded function
bodies count as "(multi-op graphs)"), the exclusions with their reasons, the
details of each failure and a total. It exits with 1 when a test that is not
excluded fails, or when an excluded test passes (remove it from the
exclusions then), else with 0.

--run-with BIN --device DEV compiles each model to a plan with
`--loom-run ... --emit-plan` and runs the plan with `BIN --device DEV`:
`--run-with build/bin/loom-run-emulated --device cuda` runs the node tests
on the CUDA backend on the host CUDA emulator. The exclusions then also
include onnx_node_exclusions_DEV.txt (tests that fail only there).

Needs an interpreter with the onnx and numpy packages (Debian's
/usr/bin/python3).
"""

import argparse
import collections
import concurrent.futures
import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

# The op types the Loom importer registers converters for: every
# `registry.add("<Op>", ...)` in lib/Import/ONNX/ElementwiseConverters.cpp,
# NNConverters.cpp and ShapeConverters.cpp. Keep in sync when an op is added.
# (Which versions of each op are imported is not checked here: a model whose
# opset selects an older version fails to import, and is listed in the
# exclusions with that reason.)
SUPPORTED_OPS = frozenset([
    # ElementwiseConverters.cpp
    "Sqrt", "Reciprocal", "Erf", "Tanh", "Sigmoid", "Relu", "Exp", "Log",
    "Neg", "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "LessOrEqual",
    "Greater", "GreaterOrEqual", "Where", "Cast", "Abs", "Sin", "Cos", "Gelu",
    "IsNaN", "IsInf", "Not", "And", "Or", "Xor", "Max", "Min", "Sum", "Mean",
    "Clip", "Mod",
    # IndexingConverters.cpp, EinsumConverter.cpp, ConvConverter.cpp
    "CumSum", "GatherElements", "GatherND", "ScatterElements", "ArgMax",
    "ArgMin", "CastLike",
    "Einsum", "Conv",
    # NNConverters.cpp
    "MatMul", "Gemm", "Softmax", "LogSoftmax", "LayerNormalization",
    "ReduceMean", "ReduceMax", "ReduceSum", "Dropout",
    "SoftmaxCrossEntropyLoss",
    # ShapeConverters.cpp
    "Identity", "Shape", "Reshape", "Transpose", "Slice", "Gather", "Concat",
    "Split", "Unsqueeze", "Squeeze", "Expand", "Flatten", "Constant",
    "ConstantOfShape", "Tile", "Range", "Trilu",
])

# Operands the importer reads as compile-time constants (NodeContext's
# getConstantInts/getConstantInput calls in the converters): op type -> input
# indices. Loom compiles static shapes, and a shape operand that is not
# constant is an error at the consuming node (docs/design/onnx-import.md). The
# node tests pass these operands as graph inputs, so a data set's values for
# them are folded into the model as initializers before it is run.
CONSTANT_OPERANDS = {
    "Reshape": (1,),            # shape
    "Slice": (1, 2, 3, 4),      # starts, ends, axes, steps
    "Split": (1,),              # split
    "Unsqueeze": (1,),          # axes
    "Squeeze": (1,),            # axes
    "Expand": (1,),             # shape
    "ConstantOfShape": (0,),    # input (the shape)
    "ReduceSum": (1,),          # axes
    "Dropout": (1, 2),          # ratio, training_mode
    "Tile": (1,),               # repeats
    "Range": (0, 1, 2),         # start, limit, delta (the result's length)
    "Trilu": (1,),              # k
    "CumSum": (1,),             # axis
}

# Optional outputs the importer does not produce (a graph output read from one
# is an error, docs/design/onnx-import.md): op type -> output indices. A test
# whose graph outputs one of them is run without it (the node's output is
# dropped from the copy of the model) and it is not compared.
UNSUPPORTED_OUTPUTS = {}

DEFAULT_DATA = "/usr/include/onnx/backend/test/data/node"
RTOL = 1e-3
ATOL = 1e-7
TIMEOUT_S = 120
STDERR_LINES = 6


class Test:
    def __init__(self, name, path, model):
        self.name = name
        self.path = path
        self.model_path = os.path.join(path, "model.onnx")
        initializers = {t.name for t in model.graph.initializer}
        self.inputs = [i.name for i in model.graph.input
                       if i.name not in initializers]
        self.outputs = [o.name for o in model.graph.output]
        self.op = group_of(model)
        # Graph inputs the importer needs as constants.
        self.folded = []
        for node in model.graph.node:
            for index in CONSTANT_OPERANDS.get(node.op_type, ()):
                if (index < len(node.input) and node.input[index] in
                        self.inputs and node.input[index] not in self.folded):
                    self.folded.append(node.input[index])
        # Graph outputs that are left out.
        self.dropped = []
        for node in model.graph.node:
            for index in UNSUPPORTED_OUTPUTS.get(node.op_type, ()):
                if (index < len(node.output) and
                        node.output[index] in self.outputs):
                    self.dropped.append(node.output[index])
        self.data_sets = sorted(
            d for d in glob.glob(os.path.join(path, "test_data_set_*"))
            if os.path.isdir(d))


def group_of(model):
    """The op type a test is reported under: its graph's one op type apart
    from Constant, or "(multi-op graphs)" for the expanded function bodies."""
    types = [n.op_type for n in model.graph.node]
    distinct = sorted(set(t for t in types if t != "Constant"))
    if not distinct:
        return "Constant"
    if len(distinct) == 1:
        return distinct[0]
    return "(multi-op graphs)"


def read_exclusions(path):
    exclusions = {}
    if not path or not os.path.exists(path):
        return exclusions
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, sep, reason = line.partition(":")
            if not sep or not reason.strip():
                sys.exit(f"{path}:{number}: expected 'test_name: reason'")
            exclusions[name.strip()] = reason.strip()
    return exclusions


def find_tests(data, pattern):
    tests = []
    for path in sorted(glob.glob(os.path.join(data, "test_*"))):
        name = os.path.basename(path)
        if pattern and not re.search(pattern, name):
            continue
        model_path = os.path.join(path, "model.onnx")
        if not os.path.exists(model_path):
            continue
        model = onnx.load(model_path)
        if not all(n.op_type in SUPPORTED_OPS and
                   n.domain in ("", "ai.onnx") for n in model.graph.node):
            continue
        tests.append(Test(name, path, model))
    return tests


def read_tensor(path):
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return tensor


def npy_name(name):
    """loom-run --output-dir's file of output `name` (npyFileName)."""
    keep = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
               b"0123456789._-")
    return "".join(chr(b) if b in keep else "%%%02X" % b
                   for b in name.encode()) + ".npy"


def compare(name, expected, got):
    """None if `got` matches `expected`, else what differs."""
    if got.shape != expected.shape:
        return f"{name}: shape {got.shape}, expected {expected.shape}"
    if got.dtype != expected.dtype:
        return f"{name}: dtype {got.dtype}, expected {expected.dtype}"
    if expected.size == 0:
        return None
    if np.issubdtype(expected.dtype, np.inexact):
        e = expected.astype(np.float64)
        g = got.astype(np.float64)
        close = np.isclose(g, e, rtol=RTOL, atol=ATOL, equal_nan=True)
        if close.all():
            return None
        finite = np.isfinite(e) & np.isfinite(g)
        abs_err = np.where(finite, np.abs(g - e), np.inf)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            rel_err = np.where(e != 0, abs_err / np.abs(e), np.inf)
        first = tuple(int(i) for i in np.argwhere(~close)[0])
        return (f"{name}: {int((~close).sum())} of {expected.size} elements "
                f"differ; max abs error {abs_err[~close].max():.6g}, max rel "
                f"error {rel_err[~close].max():.6g}; first at {first}: got "
                f"{g[first]!r}, expected {e[first]!r}")
    if np.array_equal(got, expected):
        return None
    wrong = got != expected
    first = tuple(int(i) for i in np.argwhere(wrong)[0])
    return (f"{name}: {int(wrong.sum())} of {expected.size} elements differ; "
            f"first at {first}: got {got[first]!r}, expected "
            f"{expected[first]!r}")


def numbered(data_set, prefix):
    files = glob.glob(os.path.join(data_set, prefix + "_*.pb"))
    return sorted(files, key=lambda p: int(re.findall(r"\d+",
                                                      os.path.basename(p))[0]))


def run_data_set(loom_run, test, data_set, work_dir, runner=None):
    """(passed, details, command) for one data set of `test`; the model (if
    rewritten) and the outputs go to `work_dir`. `runner`: (binary, device)
    that runs the plan `loom_run` compiles, or None (loom_run runs it)."""
    inputs = []  # (graph input name, file)
    for index, path in enumerate(numbered(data_set, "input")):
        name = read_tensor(path).name
        if not name and index < len(test.inputs):
            name = test.inputs[index]
        inputs.append((name, path))
    model_path = test.model_path
    folded = [(n, p) for n, p in inputs if n in test.folded]
    if folded or test.dropped:
        model = onnx.load(test.model_path)
        for node in model.graph.node:
            for index, name in enumerate(node.output):
                if name in test.dropped:
                    node.output[index] = ""
        kept = [o for o in model.graph.output if o.name not in test.dropped]
        del model.graph.output[:]
        model.graph.output.extend(kept)
        for name, path in folded:
            tensor = read_tensor(path)
            tensor.name = name
            model.graph.initializer.append(tensor)
        kept = [i for i in model.graph.input if i.name not in test.folded]
        del model.graph.input[:]
        model.graph.input.extend(kept)
        model_path = os.path.join(work_dir, "model.onnx")
        onnx.save(model, model_path)
        inputs = [(n, p) for n, p in inputs if n not in test.folded]
    out_dir = os.path.join(work_dir, "out")
    os.makedirs(out_dir, exist_ok=True)
    command = [loom_run, model_path]
    if runner:
        plan_path = os.path.join(work_dir, "model.plan")
        result = subprocess.run(command + ["--emit-plan", plan_path],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                errors="replace", timeout=TIMEOUT_S)
        if result.returncode != 0:
            return False, "compiling the plan failed:\n" + "\n".join(
                result.stderr.strip().splitlines()[:STDERR_LINES]), (
                " ".join(shlex.quote(c) for c in command) + " --emit-plan P")
        command = [runner[0], plan_path, "--device", runner[1]]
    for name, path in inputs:
        command += ["--input", f"{name}={path}"]
    shown = " ".join(shlex.quote(c) for c in command) + " --output-dir OUT"
    changes = []
    if folded:
        changes.append("input(s) " + ", ".join(n for n, _ in folded) +
                       " folded into initializers")
    if test.dropped:
        changes.append("output(s) " + ", ".join(test.dropped) + " dropped")
    if changes:
        shown += ("  (model.onnx: " + "; ".join(changes) +
                  "; --keep-dir keeps it)")
    command += ["--output-dir", out_dir]
    try:
        result = subprocess.run(command, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                errors="replace", timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {TIMEOUT_S} s", shown
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        text = "\n".join(lines[:STDERR_LINES])
        if len(lines) > STDERR_LINES:
            text += f"\n... ({len(lines) - STDERR_LINES} more lines)"
        what = (f"exit status {result.returncode}" if result.returncode > 0
                else f"killed by signal {-result.returncode}")
        return False, f"{what}:\n{text}", shown
    problems = []
    for index, path in enumerate(numbered(data_set, "output")):
        tensor = read_tensor(path)
        name = tensor.name or test.outputs[index]
        if name in test.dropped:
            continue
        try:
            expected = numpy_helper.to_array(tensor)
        except Exception as error:  # e.g. a type numpy cannot hold
            problems.append(f"{name}: cannot read the reference: {error}")
            continue
        got_path = os.path.join(out_dir, npy_name(name))
        if not os.path.exists(got_path):
            problems.append(f"{name}: no output {npy_name(name)} written")
            continue
        try:
            got = np.load(got_path, allow_pickle=False)
        except Exception as error:
            problems.append(f"{name}: cannot read {npy_name(name)}: {error}")
            continue
        problem = compare(name, expected, got)
        if problem:
            problems.append(problem)
    return not problems, "\n".join(problems), shown


def run_test(loom_run, test, keep_dir, runner=None):
    """(test, [(data set, passed, details, command)])."""
    results = []
    for data_set in test.data_sets:
        set_name = os.path.basename(data_set)
        if keep_dir:
            work_dir = os.path.join(keep_dir, test.name, set_name)
            os.makedirs(work_dir, exist_ok=True)
            outcome = run_data_set(loom_run, test, data_set, work_dir, runner)
        else:
            with tempfile.TemporaryDirectory(prefix="loom-onnx-") as work_dir:
                outcome = run_data_set(loom_run, test, data_set, work_dir,
                                       runner)
        results.append((set_name,) + outcome)
    return test, results


def indent(text, prefix="      "):
    return "\n".join(prefix + line for line in text.splitlines())


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(
        description="Runs ONNX's backend node tests through loom-run.")
    parser.add_argument("--loom-run", required=True, help="the loom-run binary")
    parser.add_argument("--data", default=DEFAULT_DATA,
                        help=f"the node test directory (default {DEFAULT_DATA})")
    parser.add_argument("--exclusions",
                        default=os.path.join(here, "onnx_node_exclusions.txt"),
                        help="tests expected to fail (default "
                             "onnx_node_exclusions.txt next to this script)")
    parser.add_argument("--filter", help="run only tests whose name matches "
                                         "this regular expression")
    parser.add_argument("-j", type=int, default=2, dest="jobs",
                        help="parallel loom-run processes (default 2)")
    parser.add_argument("--keep-dir", metavar="DIR",
                        help="keep each data set's rewritten model and "
                             "outputs in DIR/<test>/<data set>/ instead of "
                             "a temporary directory")
    parser.add_argument("--verbose", action="store_true",
                        help="print every test's result as it finishes")
    parser.add_argument("--run-with", metavar="BIN",
                        help="run the compiled plans with BIN (e.g. "
                             "loom-run-emulated) and --device")
    parser.add_argument("--device", default="cpu",
                        help="the device BIN runs the plans on (default cpu)")
    args = parser.parse_args()
    runner = None
    if args.run_with:
        runner = (os.path.abspath(args.run_with), args.device)
        if not os.access(runner[0], os.X_OK):
            sys.exit(f"error: {args.run_with} is not an executable")

    loom_run = os.path.abspath(args.loom_run)
    if not os.access(loom_run, os.X_OK):
        sys.exit(f"error: {args.loom_run} is not an executable")
    if not os.path.isdir(args.data):
        sys.exit(f"error: no node test directory {args.data}")
    keep_dir = os.path.abspath(args.keep_dir) if args.keep_dir else None
    exclusions = read_exclusions(args.exclusions)
    if runner and args.device != "cpu":
        device_exclusions = re.sub(r"\.txt$", f"_{args.device}.txt",
                                   args.exclusions)
        if os.path.exists(device_exclusions):
            exclusions.update(read_exclusions(device_exclusions))
    tests = find_tests(args.data, args.filter)
    if not tests:
        sys.exit("error: no applicable tests found")

    names = {t.name for t in tests}
    stale = sorted(n for n in exclusions
                   if n not in names and
                   (not args.filter or re.search(args.filter, n)))

    counts = collections.defaultdict(lambda: [0, 0, 0])  # pass, fail, excluded
    failures = []       # (test name, data set, details, command)
    unexpected = []     # excluded test names that passed
    excluded_run = []   # excluded test names that were run
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(run_test, loom_run, t, keep_dir, runner)
                   for t in tests]
        for future in concurrent.futures.as_completed(futures):
            test, results = future.result()
            passed = all(r[1] for r in results)
            if args.verbose:
                state = "PASS" if passed else "FAIL"
                if test.name in exclusions:
                    state = "XPASS" if passed else "XFAIL"
                print(f"{state}: {test.name}", flush=True)
            if test.name in exclusions:
                counts[test.op][2] += 1
                excluded_run.append(test.name)
                if passed:
                    unexpected.append(test.name)
                continue
            counts[test.op][0 if passed else 1] += 1
            for data_set, ok, details, command in results:
                if not ok:
                    failures.append((test.name, data_set, details, command))

    width = max(len(op) for op in counts)
    for op in sorted(counts):
        p, f, x = counts[op]
        print(f"{op + ':':<{width + 1}} {p} passed, {f} failed, {x} excluded")

    dropped = sorted(t.name for t in tests if t.dropped)
    if dropped:
        print(f"\nRun without the outputs Loom does not produce "
              f"(UNSUPPORTED_OUTPUTS), which are not compared: "
              f"{len(dropped)} tests")
        if args.verbose:
            for name in dropped:
                print(f"  {name}")
    if excluded_run:
        print(f"\nExcluded ({len(excluded_run)}):")
        for name in sorted(excluded_run):
            print(f"  {name}: {exclusions[name]}")
    if stale:
        print(f"\nwarning: {len(stale)} exclusions name no applicable test in "
              f"{args.data}:")
        for name in stale:
            print(f"  {name}")
    if unexpected:
        print(f"\nUnexpectedly passed ({len(unexpected)}):")
        for name in sorted(unexpected):
            print(f"  {name}: unexpectedly passed: remove it from the "
                  f"exclusions")
    if failures:
        print(f"\nFailures ({len(failures)}):")
        for name, data_set, details, command in sorted(failures):
            print(f"  {name} ({data_set}):")
            print(indent(details))
            print(indent("repro: " + command))

    total_pass = sum(c[0] for c in counts.values())
    total_fail = sum(c[1] for c in counts.values())
    total_excluded = sum(c[2] for c in counts.values())
    print(f"\nTotal: {len(tests)} applicable tests: {total_pass} passed, "
          f"{total_fail} failed, {total_excluded} excluded"
          f" ({len(unexpected)} of them unexpectedly passed)")
    return 1 if total_fail or unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
