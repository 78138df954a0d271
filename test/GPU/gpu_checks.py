#!/usr/bin/env python3
"""End-to-end checks of the CUDA backend against the CPU backend and PyTorch.

    gpu_checks.py make OUT_DIR --loom-run BIN [--python PY]
    gpu_checks.py check OUT_DIR --loom-run BIN [--device cuda|cpu]
                                [--cases A,B] [--expect-epilogues REGEX]
    gpu_checks.py ctest OUT_DIR --loom-run BIN [--python PY]
                                [--run-with BIN]

`make` (needs the full build: it compiles models, and PyTorch and the onnx
module) exports the example models with PyTorch, compiles them to plans
with `loom-run --emit-plan`, and records the references: the CPU backend's
outputs for inference plans and, for training plans, PyTorch's per-step
losses and trained parameters (train_reference.py), the parameters'
initial values (initial/), and the CPU backend's losses and trained
weights (cpu-weights/). OUT_DIR/manifest.json lists the cases. Plans are
device-neutral, so OUT_DIR can be carried to a GPU machine that only has
the runtime-only build; `check` needs only numpy there.

`check` runs every case with `loom-run --device cuda` and compares:
inference outputs with the CPU backend's (atol/rtol per case), training
losses with PyTorch's (rtol per case), and each trained parameter's update
(`--save-weights`, minus its initial value) with PyTorch's, by relative
2-norm (update_rtol per case). Prints one line per case, then
"all N cases match"; exits 1 on a mismatch, and 77 (after saying so) when
`loom-run --list-devices` shows no CUDA device.

On the GPU, each training case runs once more with `--cuda-graphs` (the
first step recorded as a CUDA graph, every step a replay of it): its
losses must equal the kernel-by-kernel run's exactly. And once with
`--tune-matmuls --cuda-graphs` (each matmul on the fastest of several
cuBLASLt algorithms, which may sum in another order; `--tuning-file`
keeps them): its losses must match PyTorch's within the case's tolerance,
and a third run that reads the kept choices back must time nothing and
give the same losses bit for bit.

`check --device cpu` runs the same comparisons on the CPU backend: it
checks this script (test/GPU/kit.test) where there is no GPU.

`--cases` checks only the named cases. `--expect-epilogues REGEX` fails a
case any of whose runs does not say where its matmul epilogues ran
(`loom-run: matmul epilogues: ...`) in words that REGEX matches: the
emulator's `LOOM_EMULATOR_NO_EPILOGUES=1` test uses it to make sure that
the cases really ran on the matmul kernel's own epilogue kernels.

`ctest` is what the `gpu` ctest label runs: it skips (77) before making
anything when there is no GPU, else makes the cases and checks them.

`--run-with BIN` runs the cases with another loom-run than the one that
made them: `loom-run-emulated` runs them on the host CUDA emulator
(docs/design/cuda-emulator.md), which the `emulator` ctest label does.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
REFERENCE = os.path.join(ROOT, "test", "Examples", "Inputs",
                         "train_reference.py")
SKIP = 77


def run(command, **kwargs):
    """Runs `command`, echoing it; raises with its output on failure."""
    result = subprocess.run(command, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kwargs)
    if result.returncode != 0:
        raise RuntimeError("command failed (exit %d): %s\n%s" %
                           (result.returncode, " ".join(command),
                            result.stdout))
    return result.stdout


def gpus(loom_run):
    """The CUDA devices `loom-run --list-devices` reports, and its output."""
    text = run([loom_run, "--list-devices"])
    return [line for line in text.splitlines()
            if line.startswith("cuda: GPU")], text


# Inference plans of each example model: model -> (precision, atol, rtol)
# of the outputs against the CPU backend's run of the same plan. In bf16
# both backends round every GEMM's result to bf16, but cuBLASLt and the
# tensor-core attention sum in another order than the CPU, so a sum near a
# rounding boundary lands a bf16 step away. The bf16 atol is two steps at
# the logits' size: GPT's (|x| < 2, step 7.8e-3) are up to one step off on
# the emulator; the MLP's (|x| < 0.33, step 2e-3) match there exactly.
# That is a coarse check: the example GPT's attention carries little of
# its logits, so a flash forward whose scale is 25% too large moves them by
# 2.5e-2 (caught) and 2% by 9.8e-3 (not). The kernel tests compare each
# kernel closely; this checks that whole bf16 plans run and agree.
INFERENCE_PRECISIONS = {
    "gpt": [("f32", 1e-4, 1e-4), ("bf16", 1.6e-2, 0)],
    "mlp": [("f32", 1e-4, 1e-4), ("bf16", 4e-3, 0)],
}

# Training runs: (name, model, optimizer flags shared by PyTorch and Loom,
# loom-only flags, steps, rtol of the losses against PyTorch's, rtol of the
# weight updates against PyTorch's (update_error)). The f32 loss tolerance
# is looser than the CPU backend's 1e-4 (test/Examples/train.test) because
# cuBLAS sums in another order and 20 AdamW steps amplify the difference.
#
# The update tolerances are about three times the emulator's bf16 noise
# (relative 2-norm of a parameter's update against PyTorch's: GPT 5.1e-3,
# MLP 1.6e-4, from roundings that fall the other way) and far above its
# f32 noise (2e-7 to 1.3e-5). On the emulator they catch what the losses
# miss: a tanh GELU derivative whose cubic term is 1.6 times too large
# (gpt-gelu-bf16-sgd: losses 1e-5 off, updates 2e-2), and bias gradients
# 2% too small (gpt-bf16-sgd 2.1e-2, mlp-bf16-adamw 1.5e-2). AdamW's
# updates hardly depend on a gradient's scale: gpt-adamw moves by 4.7e-4
# for the latter and passes.
TRAINING = [
    ("gpt-adamw", "gpt",
     ["--optimizer", "adamw", "--lr", "1e-2", "--weight-decay", "0.01",
      "--eps", "1e-5"], [], 20, 1e-3, 1e-3),
    ("mlp-sgd", "mlp",
     ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9"], [], 20,
     1e-3, 1e-3),
    # The tanh GELU and the biases in cuBLASLt's epilogues (GELU_AUX_BIAS
    # keeps the value before the GELU for the backward, which DGELU applies
    # in the next layer's input-gradient GEMM).
    ("mlp-gelu-sgd", "mlp-gelu",
     ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9"], [], 20,
     1e-3, 1e-3),
    # Mixed precision against PyTorch doing the same bf16 rounding
    # (bf16_matmul.py). A product that lands on the other side of a bf16
    # rounding step compounds over the steps (test/Examples/train-bf16.test
    # keeps the GPT run to 3 steps on the CPU for that reason).
    ("mlp-bf16-adamw", "mlp",
     ["--optimizer", "adamw", "--lr", "1e-2", "--weight-decay", "0.01",
      "--precision", "bf16"], [], 20, 1e-3, 2e-3),
    ("gpt-bf16-sgd", "gpt",
     ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9",
      "--precision", "bf16"], [], 5, 1e-3, 1.5e-2),
    # GPT-2's tanh GELU in bf16: cuBLASLt's GELU_AUX_BIAS with a bf16 bias
    # and a bf16 aux (the sum the GELU's backward reads), and DGELU reading
    # that aux in c_proj's input-gradient GEMM. Tighter than the others:
    # the MLP's share of five steps' losses is small, and at 1e-3 a GELU
    # gradient off by half (7.4e-4) passed. The emulator is 3.3e-5 off
    # (4.5e-5 on the own epilogue kernels), the CPU backend 2.2e-7.
    ("gpt-gelu-bf16-sgd", "gpt-gelu",
     ["--optimizer", "sgd", "--lr", "0.1", "--momentum", "0.9",
      "--precision", "bf16"], [], 5, 3e-4, 1.5e-2),
]


def make(out_dir, loom_run, python):
    os.makedirs(out_dir, exist_ok=True)
    cases = []

    # Inference: the GPT and MLP examples, CPU outputs as the reference.
    for model, script, input_name in [("gpt", "gpt/export_gpt.py", "idx"),
                                      ("mlp", "mlp/export_mlp.py", "x")]:
        case = os.path.join(out_dir, model + "-infer")
        os.makedirs(case, exist_ok=True)
        run([python, os.path.join(ROOT, "examples", script), "--opset", "17",
             "--out", os.path.join(case, "model.onnx"), "--save-reference",
             os.path.join(case, "torch")])
        inputs = ["--input", "%s=%s" % (input_name,
                                        os.path.join(case, "torch",
                                                     "input.npy"))]
        for precision, atol, rtol in INFERENCE_PRECISIONS[model]:
            name = model + "-infer" + ("" if precision == "f32" else
                                       "-" + precision)
            folder = os.path.join(out_dir, name)
            os.makedirs(folder, exist_ok=True)
            run([loom_run, os.path.join(case, "model.onnx")] + inputs +
                ["--precision", precision, "--emit-plan",
                 os.path.join(folder, "model.plan"), "--output-dir",
                 os.path.join(folder, "cpu")])
            cases.append({"name": name, "kind": "infer", "dir": name,
                          "inputs": inputs, "atol": atol, "rtol": rtol})

    # Multi-rank: 4 thread ranks sharing the GPU, every collective.
    case = os.path.join(out_dir, "collectives-4-ranks")
    os.makedirs(case, exist_ok=True)
    inputs_dir = os.path.join(ROOT, "test", "tools", "loom-run", "Inputs")
    run([python, os.path.join(inputs_dir, "collectives.py"), "inputs", case])
    inputs = ["--ranks", "4", "--input",
              "x=" + os.path.join(case, "x{rank}.npy")]
    run([loom_run, os.path.join(inputs_dir, "collectives-4-ranks.mlir"),
         "--emit-plan", os.path.join(case, "model.plan")] +
        inputs + ["--output-dir", os.path.join(case, "cpu")])
    cases.append({"name": "collectives-4-ranks", "kind": "infer",
                  "dir": "collectives-4-ranks", "inputs": inputs,
                  "atol": 1e-5, "rtol": 1e-5})

    # Training: PyTorch's losses, and the plan of one step.
    for name, model, flags, loom_flags, steps, rtol, update_rtol in TRAINING:
        case = os.path.join(out_dir, name)
        common = flags + ["--steps", str(steps), "--batch-size", "4"]
        run([python, REFERENCE, model, case] + common)
        data = ["--input", "%s=%s" % ("idx" if model.startswith("gpt")
                                      else "x",
                                      os.path.join(case, "input.npy")),
                "--labels", os.path.join(case, "labels.npy"),
                "--batch-size", "4"]
        optimizer = [f for f in flags]
        run([loom_run, os.path.join(case, "model.onnx"), "--train"] +
            data + optimizer + loom_flags +
            ["--steps", "0", "--emit-plan", os.path.join(case, "model.plan")])
        save_initial_weights(case)
        run([loom_run, os.path.join(case, "model.plan"), "--train"] + data +
            ["--steps", str(steps), "--metrics",
             os.path.join(case, "cpu.jsonl"), "--save-weights",
             os.path.join(case, "cpu-weights")])
        cases.append({"name": name, "kind": "train", "dir": name,
                      "inputs": data, "steps": steps, "rtol": rtol,
                      "update_rtol": update_rtol})

    # Paths are relative to the manifest, so the directory can move.
    for case in cases:
        case["inputs"] = [arg.replace(out_dir + os.sep, "{dir}/")
                          for arg in case["inputs"]]
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)
    print("made %d cases in %s" % (len(cases), out_dir))


def save_initial_weights(case):
    """The model's parameters before training, as case/initial/NAME.npy for
    every parameter PyTorch's reference trained (case/ref/NAME.npy), so
    that `check` needs no onnx module."""
    import onnx
    from onnx import numpy_helper
    initial = {t.name: numpy_helper.to_array(t) for t in
               onnx.load(os.path.join(case, "model.onnx")).graph.initializer}
    folder = os.path.join(case, "initial")
    os.makedirs(folder, exist_ok=True)
    for name in trained_names(case):
        np.save(os.path.join(folder, name + ".npy"), initial[name])


def trained_names(case):
    """The parameters PyTorch's reference trained (ref/NAME.npy; its names
    are the models', which need no escaping)."""
    return sorted(f[:-4] for f in os.listdir(os.path.join(case, "ref"))
                  if f.endswith(".npy"))


def weight_file(name):
    """`loom-run --save-weights`'s file name of weight `name`: bytes other
    than letters, digits, '.', '_' and '-' as %XX."""
    keep = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
               b"0123456789._-")
    return "".join(chr(b) if b in keep else "%%%02X" % b
                   for b in name.encode()) + ".npy"


def update_error(case, trained):
    """The worst relative error of a run's weight updates against
    PyTorch's, and the parameter it is in: per parameter,
    |(w - w0) - (r - w0)| / |r - w0| in the 2-norm, with w0 the initial
    value, w the run's (trained/) and r PyTorch's. Updates rather than
    values: after a few steps a parameter is still mostly its initial
    value, which would hide a gradient that is off by a few percent. The
    2-norm rather than the largest element: a bf16 rounding that falls the
    other way moves one element by a whole rounding step, a wrong gradient
    moves all of them. A parameter PyTorch did not move must not move."""
    worst, where = 0.0, "-"
    for name in trained_names(case):
        w0 = np.load(os.path.join(case, "initial", name + ".npy"))
        w0 = w0.astype(np.float64)
        expected = np.load(os.path.join(case, "ref", name + ".npy")) - w0
        path = os.path.join(trained, weight_file(name))
        if not os.path.exists(path):
            return float("inf"), name + " (missing)"
        got = np.load(path).astype(np.float64) - w0
        if got.shape != expected.shape:
            return float("inf"), name + " (shape %s)" % (got.shape,)
        difference = float(np.linalg.norm(got - expected))
        scale = float(np.linalg.norm(expected))
        error = difference / scale if scale > 0 else (
            0.0 if difference == 0 else float("inf"))
        if np.isnan(error) or error > worst:
            worst, where = error, name
            if np.isnan(error):
                break
    return worst, where


def losses(path):
    with open(path) as f:
        return [float(json.loads(line)["loss"]) for line in f if line.strip()]


def compare_dirs(reference, actual, atol, rtol):
    """(ok, worst absolute difference, message) over every .npy of
    `reference` (recursively: multi-rank runs write rank<R>/)."""
    worst, problems, count = 0.0, [], 0
    for folder, _, files in os.walk(reference):
        for name in sorted(files):
            if not name.endswith(".npy"):
                continue
            relative = os.path.relpath(os.path.join(folder, name), reference)
            expected = np.load(os.path.join(reference, relative))
            path = os.path.join(actual, relative)
            if not os.path.exists(path):
                problems.append(relative + " missing")
                continue
            got = np.load(path)
            count += 1
            if got.shape != expected.shape or got.dtype != expected.dtype:
                problems.append("%s: %s %s, expected %s %s" %
                                (relative, got.dtype, got.shape,
                                 expected.dtype, expected.shape))
                continue
            if expected.dtype.kind in "fc":
                difference = np.abs(got.astype(np.float64) -
                                    expected.astype(np.float64))
                largest = float(difference.max(initial=0))
                # max() would drop a NaN, which is the worst of all.
                worst = largest if np.isnan(largest) else max(worst, largest)
                if not np.allclose(got, expected, atol=atol, rtol=rtol,
                                   equal_nan=True):
                    problems.append("%s: max |actual - cpu| = %.3g" %
                                    (relative, difference.max()))
            elif not np.array_equal(got, expected):
                problems.append(relative + " differs")
    if count == 0:
        problems.append("no outputs compared")
    return not problems, worst, "; ".join(problems)


def said_after(output, prefix):
    """What the last line of `output` holding `prefix` says after it."""
    notes = [line.split(prefix, 1)[1] for line in output.splitlines()
             if prefix in line]
    return notes[-1] if notes else "(nothing)"


def variant_losses(loom_run, plan, inputs, steps, folder, flags, name):
    """The losses of a run with `flags`, and a function giving what it said
    after a prefix ("CUDA graphs: ")."""
    metrics = os.path.join(folder, "out-%s.jsonl" % name)
    output = run([loom_run, plan, "--train", "--device", "cuda"] + flags +
                 inputs + ["--steps", str(steps), "--metrics", metrics])

    return losses(metrics), lambda prefix: said_after(output, prefix)


def check(out_dir, loom_run, device="cuda", only=None, epilogues=None):
    """`epilogues`: a compiled regular expression, or None."""
    if device == "cuda":
        devices, listing = gpus(loom_run)
        if not devices:
            print("SKIPPED: no CUDA device (loom-run --list-devices says:)")
            print(listing.rstrip())
            return SKIP
        print("\n".join(devices))
    with open(os.path.join(out_dir, "manifest.json")) as f:
        cases = json.load(f)["cases"]
    if only:
        unknown = set(only) - set(case["name"] for case in cases)
        if unknown:
            print("no such case: %s" % ", ".join(sorted(unknown)))
            return 1
        cases = [case for case in cases if case["name"] in only]
    stale = [case["name"] for case in cases if case["kind"] == "train" and
             ("update_rtol" not in case or not os.path.isdir(
                 os.path.join(out_dir, case["dir"], "initial")))]
    if stale:
        print("%s: made by an older gpu_checks.py (no weight references for "
              "%s): make the cases again (scripts/gpu-kit.sh)" %
              (out_dir, ", ".join(stale)))
        return 1
    failures = 0
    for case in cases:
        folder = os.path.join(out_dir, case["dir"])
        inputs = [arg.replace("{dir}", out_dir) for arg in case["inputs"]]
        plan = os.path.join(folder, "model.plan")
        ran_on = []  # (flags, where the matmul epilogues ran) of variants
        try:
            if case["kind"] == "infer":
                output = os.path.join(folder, "out-" + device)
                first = run([loom_run, plan, "--device", device] + inputs +
                            ["--output-dir", output])
                ok, worst, message = compare_dirs(
                    os.path.join(folder, "cpu"), output, case["atol"],
                    case["rtol"])
                line = "max |%s - cpu| %.3g" % (device, worst)
            else:
                metrics = os.path.join(folder, "out-" + device + ".jsonl")
                weights = os.path.join(folder, "weights-" + device)
                shutil.rmtree(weights, ignore_errors=True)  # none stale
                first = run([loom_run, plan, "--train", "--device", device] +
                            inputs + ["--steps", str(case["steps"]),
                                      "--metrics", metrics,
                                      "--save-weights", weights])
                with open(os.path.join(folder, "ref", "losses.json")) as f:
                    reference = json.load(f)
                got = losses(metrics)
                cpu = losses(os.path.join(folder, "cpu.jsonl")) if (
                    device == "cuda") else got
                errors = [abs(a - b) / max(abs(b), 1e-12)
                          for a, b in zip(got, reference)]
                worst = max(errors) if errors else float("inf")
                ok = len(got) == len(reference) and worst <= case["rtol"]
                message = "" if ok else "losses differ: %s %s torch %s" % (
                    device, got, reference)
                line = ("%d losses, max relative error vs torch %.3g "
                        "(cpu backend: %.3g)" %
                        (len(got), worst,
                         max(abs(a - b) / max(abs(b), 1e-12)
                             for a, b in zip(cpu, reference))))
                # The weight updates, which a gradient error shows in
                # directly (AdamW's losses hardly move when a gradient is
                # scaled, and a small layer's share of the loss is small).
                updated, where = update_error(folder, weights)
                cpu_updated, _ = update_error(
                    folder, os.path.join(folder, "cpu-weights")
                    if device == "cuda" else weights)
                if not updated <= case["update_rtol"]:
                    ok = False
                    message += ("\n  weight updates differ from torch's: "
                                "%.3g in %s (tolerance %g)" %
                                (updated, where, case["update_rtol"]))
                line += ", updates %.3g in %s (cpu backend: %.3g)" % (
                    updated, where, cpu_updated)
                if device == "cuda":
                    replayed, said = variant_losses(
                        loom_run, plan, inputs, case["steps"], folder,
                        ["--cuda-graphs"], "cuda-graphs")
                    note = said("CUDA graphs: ")
                    if replayed != got or note != "replayed":
                        ok = False
                        message += "\n  --cuda-graphs (%s): %s, without: %s" % (
                            note, replayed, got)
                    line += ", graphs: %s" % (
                        "same losses" if replayed == got else "DIFFERENT")
                    ran_on.append(("--cuda-graphs",
                                   said("matmul epilogues: ")))
                    tuning_file = os.path.join(folder, "out-tuning.txt")
                    if os.path.exists(tuning_file):
                        os.remove(tuning_file)
                    tuned, said = variant_losses(
                        loom_run, plan, inputs, case["steps"], folder,
                        ["--tuning-file", tuning_file, "--cuda-graphs"],
                        "tuned")
                    # The kept choices, read back: nothing timed, the same
                    # algorithms, so the same losses bit for bit.
                    reread, reread_said = variant_losses(
                        loom_run, plan, inputs, case["steps"], folder,
                        ["--tuning-file", tuning_file], "tuned-again")
                    reread_note = reread_said("matmul tuning: ")
                    if (reread != tuned or "problems timed" in reread_note or
                            "problems read from" not in reread_note):
                        ok = False
                        message += ("\n  --tuning-file read back (%s): %s, "
                                    "first: %s" % (
                                        reread_said("matmul tuning: "),
                                        reread, tuned))
                    tuned_worst = max(
                        [abs(a - b) / max(abs(b), 1e-12)
                         for a, b in zip(tuned, reference)] or [float("inf")])
                    if (len(tuned) != len(reference) or
                            not tuned_worst <= case["rtol"] or
                            said("CUDA graphs: ") != "replayed"):
                        ok = False
                        message += ("\n  --tune-matmuls (graphs %s): %s "
                                    "torch %s" % (said("CUDA graphs: "),
                                                  tuned, reference))
                    line += ", tuned: %.3g (%s)" % (
                        tuned_worst, said("matmul tuning: "))
                    ran_on.append(("--tune-matmuls",
                                   said("matmul epilogues: ")))
            if epilogues is not None:
                ran_on.insert(0, ("", said_after(first,
                                                 "matmul epilogues: ")))
                line += ", epilogues: " + ran_on[0][1]
                for flags, where in ran_on:
                    if not epilogues.search(where):
                        ok = False
                        message += ("\n  matmul epilogues%s: %s, expected "
                                    "%s" % (" with " + flags if flags else
                                            "", where, epilogues.pattern))
        except (RuntimeError, OSError, ValueError) as error:
            ok, line, message = False, "failed", str(error)
        print("%-22s %s  %s" % (case["name"], "ok" if ok else "MISMATCH",
                                line))
        if not ok:
            print("  " + message.lstrip("\n "))
            failures += 1
    if failures:
        print("%d of %d cases do not match" % (failures, len(cases)))
        return 1
    print("all %d cases match" % len(cases))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["make", "check", "ctest"])
    parser.add_argument("out_dir")
    parser.add_argument("--loom-run", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--cases", help="check only these (comma-separated)")
    parser.add_argument("--expect-epilogues", metavar="REGEX",
                        help="where each case's matmul epilogues must run, "
                        "as loom-run says it")
    parser.add_argument("--run-with",
                        help="the loom-run that runs the cases (default: "
                        "--loom-run), e.g. loom-run-emulated")
    args = parser.parse_args()
    out_dir = os.path.abspath(args.out_dir)
    runner = args.run_with or args.loom_run
    if args.command == "make":
        make(out_dir, args.loom_run, args.python)
        return 0
    if args.command == "ctest":
        devices, listing = gpus(runner)
        if not devices:
            print("SKIPPED: no CUDA device (loom-run --list-devices says:)")
            print(listing.rstrip())
            return SKIP
        make(out_dir, args.loom_run, args.python)
    try:
        epilogues = (re.compile(args.expect_epilogues)
                     if args.expect_epilogues is not None else None)
    except re.error as error:
        parser.error("--expect-epilogues: %s" % error)
    return check(out_dir, runner, args.device,
                 args.cases.split(",") if args.cases else None, epilogues)


if __name__ == "__main__":
    sys.exit(main())
