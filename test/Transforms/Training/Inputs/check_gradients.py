#!/usr/bin/env python3
"""Checks every loom-autodiff gradient rule against finite differences.

    check_gradients.py --bin DIR [--filter REGEX] [-j N]

DIR holds loom-opt and loom-run (build/bin).

Each case below is a small f64 loss function of trainable parameters, given
as the body of `func.func @forward(...) -> tensor<f64>`. The script fills the
parameters with seeded random values, differentiates the module with
`loom-opt --loom-autodiff`, runs `forward_grad` with loom-run, and compares
every gradient element with the central difference
(loss(p + h) - loss(p - h)) / 2h of `forward`, also run by loom-run. Prints
one line per case; exits 1 if any gradient is off by more than
atol + rtol * |fd| (by default 1e-6 + 1e-5 |fd|, with h = 1e-6).
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

# name: (parameters [(name, shape, low, high)], inputs {name: array}, body
#        [, finite-difference step and tolerance overrides])
# In bodies, %P<name> is the parameter read; the loss is returned.
CASES = {
    "add_sub_broadcast": ([("a", [2, 3], -1, 1), ("b", [3], -1, 1)], {}, """
  %s = loom.add %Pa, %Pb : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>
  %d = loom.sub %Pb, %s : (tensor<3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
  %m = loom.mul %d, %s : tensor<2x3xf64>
  %l = loom.reduce_sum %m [0, 1] : tensor<2x3xf64> -> tensor<f64>"""),
    "mul_div_keepdims": ([("a", [2, 3], 0.5, 1.5), ("b", [2, 1], 0.5, 1.5)], {}, """
  %q = loom.div %Pa, %Pb : (tensor<2x3xf64>, tensor<2x1xf64>) -> tensor<2x3xf64>
  %m = loom.mul %q, %Pa : tensor<2x3xf64>
  %l = loom.reduce_sum %m [0, 1] : tensor<2x3xf64> -> tensor<f64>"""),
    "pow": ([("a", [4], 0.5, 1.5), ("b", [4], 0.5, 2.0)], {}, """
  %p = loom.pow %Pa, %Pb : tensor<4xf64>
  %l = loom.reduce_sum %p [0] : tensor<4xf64> -> tensor<f64>"""),
    # Away from x = 0 (abs) and from ties (maximum, minimum), where the
    # functions have kinks; fmod away from its jumps (a / b in (1.1, 1.6)).
    "trig_abs_fmod": ([("a", [5], 0.2, 1.5), ("b", [5], -1.5, -0.2),
                       ("n", [5], 1.1, 1.4), ("d", [5], 0.9, 1.0)], {}, """
  %0 = loom.sin %Pa : tensor<5xf64>
  %1 = loom.cos %Pa : tensor<5xf64>
  %2 = loom.abs %Pb : tensor<5xf64>
  %3 = loom.fmod %Pn, %Pd : tensor<5xf64>
  %s1 = loom.mul %0, %1 : tensor<5xf64>
  %s2 = loom.mul %2, %s1 : tensor<5xf64>
  %s3 = loom.mul %s2, %3 : tensor<5xf64>
  %l = loom.reduce_sum %s3 [0] : tensor<5xf64> -> tensor<f64>"""),
    "maximum_minimum_broadcast": ([("a", [2, 3], -1, 1), ("b", [3], -1, 1)],
                                  {}, """
  %x = loom.maximum %Pa, %Pb : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>
  %n = loom.minimum %Pb, %Pa : (tensor<3xf64>, tensor<2x3xf64>) -> tensor<2x3xf64>
  %m = loom.mul %x, %n : tensor<2x3xf64>
  %e = loom.exp %m : tensor<2x3xf64>
  %l = loom.reduce_sum %e [0, 1] : tensor<2x3xf64> -> tensor<f64>"""),
    "unary_math": ([("a", [5], 0.5, 1.5)], {}, """
  %0 = loom.exp %Pa : tensor<5xf64>
  %1 = loom.log %0 : tensor<5xf64>
  %2 = loom.sqrt %Pa : tensor<5xf64>
  %3 = loom.rsqrt %Pa : tensor<5xf64>
  %4 = loom.reciprocal %Pa : tensor<5xf64>
  %5 = loom.tanh %Pa : tensor<5xf64>
  %6 = loom.sigmoid %Pa : tensor<5xf64>
  %7 = loom.erf %Pa : tensor<5xf64>
  %8 = loom.neg %Pa : tensor<5xf64>
  %s1 = loom.mul %0, %1 : tensor<5xf64>
  %s2 = loom.mul %2, %3 : tensor<5xf64>
  %s3 = loom.mul %4, %5 : tensor<5xf64>
  %s4 = loom.mul %6, %7 : tensor<5xf64>
  %s5 = loom.mul %8, %s1 : tensor<5xf64>
  %t1 = loom.add %s2, %s3 : tensor<5xf64>
  %t2 = loom.add %s4, %s5 : tensor<5xf64>
  %t3 = loom.add %t1, %t2 : tensor<5xf64>
  %l = loom.reduce_sum %t3 [0] : tensor<5xf64> -> tensor<f64>"""),
    "relu_select_compare": ([("a", [6], -1, 1), ("b", [6], -1, 1)], {}, """
  %r = loom.relu %Pa : tensor<6xf64>
  %c = loom.compare gt, %Pa, %Pb : (tensor<6xf64>, tensor<6xf64>) -> tensor<6xi1>
  %s = loom.select %c, %r, %Pb : (tensor<6xi1>, tensor<6xf64>, tensor<6xf64>) -> tensor<6xf64>
  %m = loom.mul %s, %Pb : tensor<6xf64>
  %l = loom.reduce_sum %m [0] : tensor<6xf64> -> tensor<f64>"""),
    "gelu": ([("a", [6], -2, 2)], {}, """
  %g = loom.gelu %Pa : tensor<6xf64>
  %t = loom.gelu %Pa approximate tanh : tensor<6xf64>
  %m = loom.mul %g, %t : tensor<6xf64>
  %l = loom.reduce_sum %m [0] : tensor<6xf64> -> tensor<f64>"""),
    "cast_roundtrip": ([("a", [3], -1, 1)], {}, """
  %f = loom.cast %Pa : tensor<3xf64> -> tensor<3xf32>
  %d = loom.cast %f : tensor<3xf32> -> tensor<3xf64>
  %m = loom.mul %d, %Pa : tensor<3xf64>
  %l = loom.reduce_sum %m [0] : tensor<3xf64> -> tensor<f64>""",
        # The loss passes through f32: a step of 1e-6 would be lost in its
        # rounding. The loss is quadratic, so a large central step is exact.
        {"h": 1e-2, "atol": 1e-4}),
    "matmul_plain": ([("a", [2, 3], -1, 1), ("b", [3, 4], -1, 1)], {}, """
  %c = loom.matmul %Pa, %Pb : (tensor<2x3xf64>, tensor<3x4xf64>) -> tensor<2x4xf64>
  %m = loom.mul %c, %c : tensor<2x4xf64>
  %l = loom.reduce_sum %m [0, 1] : tensor<2x4xf64> -> tensor<f64>"""),
    "matmul_transposed": ([("a", [3, 2], -1, 1), ("b", [4, 3], -1, 1)], {}, """
  %c = loom.matmul %Pa, %Pb transpose_lhs transpose_rhs : (tensor<3x2xf64>, tensor<4x3xf64>) -> tensor<2x4xf64>
  %m = loom.mul %c, %c : tensor<2x4xf64>
  %l = loom.reduce_sum %m [0, 1] : tensor<2x4xf64> -> tensor<f64>"""),
    "matmul_batched_shared": ([("a", [2, 2, 3], -1, 1), ("b", [4, 3], -1, 1)], {}, """
  %c = loom.matmul %Pa, %Pb transpose_rhs : (tensor<2x2x3xf64>, tensor<4x3xf64>) -> tensor<2x2x4xf64>
  %m = loom.mul %c, %c : tensor<2x2x4xf64>
  %l = loom.reduce_sum %m [0, 1, 2] : tensor<2x2x4xf64> -> tensor<f64>"""),
    "matmul_batched_lhs_transposed": ([("a", [2, 3, 2], -1, 1), ("b", [2, 3, 4], -1, 1)], {}, """
  %c = loom.matmul %Pa, %Pb transpose_lhs : (tensor<2x3x2xf64>, tensor<2x3x4xf64>) -> tensor<2x2x4xf64>
  %m = loom.mul %c, %c : tensor<2x2x4xf64>
  %l = loom.reduce_sum %m [0, 1, 2] : tensor<2x2x4xf64> -> tensor<f64>"""),
    "bias_add": ([("a", [2, 3], -1, 1), ("b", [3], -1, 1)], {}, """
  %y = loom.bias_add %Pa, %Pb : tensor<2x3xf64>, tensor<3xf64>
  %m = loom.mul %y, %y : tensor<2x3xf64>
  %l = loom.reduce_sum %m [0, 1] : tensor<2x3xf64> -> tensor<f64>"""),
    "reshape_transpose_broadcast": ([("a", [2, 3], -1, 1), ("b", [3, 1], -1, 1)], {}, """
  %r = loom.reshape %Pa : tensor<2x3xf64> -> tensor<3x2xf64>
  %t = loom.transpose %r [1, 0] : tensor<3x2xf64> -> tensor<2x3xf64>
  %b = loom.broadcast %Pb : tensor<3x1xf64> -> tensor<2x3x4xf64>
  %bt = loom.reduce_sum %b [2] : tensor<2x3x4xf64> -> tensor<2x3xf64>
  %m = loom.mul %t, %bt : tensor<2x3xf64>
  %s = loom.mul %m, %Pa : tensor<2x3xf64>
  %l = loom.reduce_sum %s [0, 1] : tensor<2x3xf64> -> tensor<f64>"""),
    "reduce_mean_max": ([("a", [2, 4], -1, 1)], {}, """
  %m = loom.reduce_mean %Pa [1] keepdims : tensor<2x4xf64> -> tensor<2x1xf64>
  %x = loom.reduce_max %Pa [1] : tensor<2x4xf64> -> tensor<2xf64>
  %d = loom.sub %Pa, %m : (tensor<2x4xf64>, tensor<2x1xf64>) -> tensor<2x4xf64>
  %q = loom.mul %d, %d : tensor<2x4xf64>
  %s = loom.reduce_sum %q [0, 1] : tensor<2x4xf64> -> tensor<f64>
  %xs = loom.reduce_sum %x [0] : tensor<2xf64> -> tensor<f64>
  %xx = loom.mul %xs, %xs : tensor<f64>
  %l = loom.add %s, %xx : tensor<f64>"""),
    "softmax_log_softmax": ([("a", [2, 4], -1, 1), ("w", [2, 4], -1, 1)], {}, """
  %p = loom.softmax %Pa axis 1 : tensor<2x4xf64>
  %q = loom.log_softmax %Pa axis 0 : tensor<2x4xf64>
  %s = loom.add %p, %q : tensor<2x4xf64>
  %m = loom.mul %s, %Pw : tensor<2x4xf64>
  %l = loom.reduce_sum %m [0, 1] : tensor<2x4xf64> -> tensor<f64>"""),
    "layer_norm": ([("x", [2, 2, 3], -1, 1), ("g", [2, 3], 0.5, 1.5), ("b", [2, 3], -1, 1), ("w", [2, 2, 3], -1, 1)], {}, """
  %y = loom.layer_norm %Px, %Pg, %Pb axis 1 : tensor<2x2x3xf64>, tensor<2x3xf64>
  %m = loom.mul %y, %Pw : tensor<2x2x3xf64>
  %l = loom.reduce_sum %m [0, 1, 2] : tensor<2x2x3xf64> -> tensor<f64>"""),
    "cross_entropy_mean": ([("z", [2, 3, 4], -1, 1)], {"labels": np.array([[0, 3, 1], [2, 2, 0]], dtype=np.int64)}, """
  %l = loom.cross_entropy %Pz, %labels : (tensor<2x3x4xf64>, tensor<2x3xi64>) -> tensor<f64>"""),
    "cross_entropy_ignore_sum": ([("z", [4, 3], -1, 1)], {"labels": np.array([0, -100, 2, 1], dtype=np.int64)}, """
  %l = loom.cross_entropy %Pz, %labels reduction sum ignore_index -100 : (tensor<4x3xf64>, tensor<4xi64>) -> tensor<f64>"""),
    "cross_entropy_ignore_mean": ([("z", [4, 3], -1, 1)], {"labels": np.array([0, -100, 2, 1], dtype=np.int64)}, """
  %l = loom.cross_entropy %Pz, %labels ignore_index -100 : (tensor<4x3xf64>, tensor<4xi64>) -> tensor<f64>"""),
    "cross_entropy_none": ([("z", [3, 4], -1, 1), ("w", [3], -1, 1)], {"labels": np.array([1, 0, 3], dtype=np.int64)}, """
  %p = loom.cross_entropy %Pz, %labels reduction none : (tensor<3x4xf64>, tensor<3xi64>) -> tensor<3xf64>
  %m = loom.mul %p, %Pw : tensor<3xf64>
  %l = loom.reduce_sum %m [0] : tensor<3xf64> -> tensor<f64>"""),
    "gather_embedding": ([("t", [5, 2], -1, 1), ("w", [2, 3, 2], -1, 1)], {"ids": np.array([[0, 4, -1], [2, 2, 1]], dtype=np.int64)}, """
  %e = loom.gather %Pt[%ids] : (tensor<5x2xf64>, tensor<2x3xi64>) -> tensor<2x3x2xf64>
  %m = loom.mul %e, %Pw : tensor<2x3x2xf64>
  %l = loom.reduce_sum %m [0, 1, 2] : tensor<2x3x2xf64> -> tensor<f64>"""),
    # Gathers along other axes than 0, strided slices (a negative-step ONNX
    # Slice is a reversing gather and one), cumulative sums both ways.
    "gather_axis_strided_slice_cumsum": ([("a", [2, 5, 3], -1, 1), ("w", [2, 3, 3], -1, 1), ("c", [4, 3], -1, 1)], {"ids": np.array([4, 0, -1], dtype=np.int64)}, """
  %g = loom.gather %Pa[%ids] axis 1 : (tensor<2x5x3xf64>, tensor<3xi64>) -> tensor<2x3x3xf64>
  %s = loom.slice %Pa [0:2, 1:5:2, 0:3] : tensor<2x5x3xf64> -> tensor<2x2x3xf64>
  %m = loom.mul %g, %Pw : tensor<2x3x3xf64>
  %t = loom.mul %s, %s : tensor<2x2x3xf64>
  %c1 = loom.cumsum %Pc axis 0 : tensor<4x3xf64>
  %c2 = loom.cumsum %c1 axis 1 exclusive reverse : tensor<4x3xf64>
  %c3 = loom.mul %c2, %Pc : tensor<4x3xf64>
  %l1 = loom.reduce_sum %m [0, 1, 2] : tensor<2x3x3xf64> -> tensor<f64>
  %l2 = loom.reduce_sum %t [0, 1, 2] : tensor<2x2x3xf64> -> tensor<f64>
  %l3 = loom.reduce_sum %c3 [0, 1] : tensor<4x3xf64> -> tensor<f64>
  %l4 = loom.add %l1, %l2 : tensor<f64>
  %l = loom.add %l4, %l3 : tensor<f64>"""),
    "slice_concat_split": ([("a", [4, 3], -1, 1), ("w", [2, 2], -1, 1)], {}, """
  %s = loom.slice %Pa [1:3, 0:2] : tensor<4x3xf64> -> tensor<2x2xf64>
  %c = loom.concat %s, %Pw axis 1 : (tensor<2x2xf64>, tensor<2x2xf64>) -> tensor<2x4xf64>
  %p:2 = loom.split %c axis 1 : tensor<2x4xf64> -> tensor<2x1xf64>, tensor<2x3xf64>
  %q = loom.mul %p#1, %p#1 : tensor<2x3xf64>
  %l = loom.reduce_sum %q [0, 1] : tensor<2x3xf64> -> tensor<f64>"""),
    # Masked scores are constants: with -inf they drop out, with a finite
    # fill they still weigh in the softmax (and in dv) but pass no
    # gradient to q and k.
    "attention_causal": ([("q", [2, 3, 2], -1, 1), ("k", [2, 4, 2], -1, 1), ("v", [2, 4, 3], -1, 1), ("w", [2, 3, 3], -1, 1)], {}, """
  %m = loom.constant dense<[[[false, false, true, true], [false, false, false, true], [false, false, false, false]]]> : tensor<1x3x4xi1>
  %o, %lse = loom.attention %Pq, %Pk, %Pv mask %m scale 0.7 : (tensor<2x3x2xf64>, tensor<2x4x2xf64>, tensor<2x4x3xf64>, tensor<1x3x4xi1>) -> (tensor<2x3x3xf64>, tensor<2x3xf64>)
  %x = loom.mul %o, %Pw : tensor<2x3x3xf64>
  %l = loom.reduce_sum %x [0, 1, 2] : tensor<2x3x3xf64> -> tensor<f64>"""),
    "attention_finite_fill": ([("q", [2, 3, 2], -1, 1), ("k", [2, 4, 2], -1, 1), ("v", [2, 4, 3], -1, 1), ("w", [2, 3, 3], -1, 1)], {}, """
  %m = loom.constant dense<[[[false, true, false, true], [true, true, true, true], [false, false, false, false]], [[true, false, false, false], [false, false, true, false], [false, true, true, false]]]> : tensor<2x3x4xi1>
  %o, %lse = loom.attention %Pq, %Pk, %Pv mask %m scale 1.3 mask_value -0.5 : (tensor<2x3x2xf64>, tensor<2x4x2xf64>, tensor<2x4x3xf64>, tensor<2x3x4xi1>) -> (tensor<2x3x3xf64>, tensor<2x3xf64>)
  %x = loom.mul %o, %Pw : tensor<2x3x3xf64>
  %l = loom.reduce_sum %x [0, 1, 2] : tensor<2x3x3xf64> -> tensor<f64>"""),
    # Seq-major operands [S, H, D] with a mask that differs per head.
    "attention_seq_major": ([("q", [3, 2, 2], -1, 1), ("k", [4, 2, 2], -1, 1), ("v", [4, 2, 3], -1, 1), ("w", [3, 2, 3], -1, 1)], {}, """
  %m = loom.constant dense<[[[false, false, true, true], [false, false, false, true], [false, false, false, false]], [[false, true, true, true], [true, false, false, true], [false, false, true, false]]]> : tensor<2x3x4xi1>
  %o, %lse = loom.attention %Pq, %Pk, %Pv mask %m scale 0.7 seq_major : (tensor<3x2x2xf64>, tensor<4x2x2xf64>, tensor<4x2x3xf64>, tensor<2x3x4xi1>) -> (tensor<3x2x3xf64>, tensor<3x2xf64>)
  %x = loom.mul %o, %Pw : tensor<3x2x3xf64>
  %l = loom.reduce_sum %x [0, 1, 2] : tensor<3x2x3xf64> -> tensor<f64>"""),
    "dropout": ([("a", [8], -1, 1)], {}, """
  %y, %mask = loom.dropout %Pa ratio 0.5 seed 3 : tensor<8xf64>
  %m = loom.mul %y, %Pa : tensor<8xf64>
  %l = loom.reduce_sum %m [0] : tensor<8xf64> -> tensor<f64>"""),
}

TYPE = re.compile(r"%P(\w+)")


def mlir_type(shape):
    return "tensor<" + "".join(f"{d}x" for d in shape) + "f64>"


def module_text(params, values, inputs, body):
    lines = []
    for name, shape, _, _ in params:
        flat = ", ".join(repr(float(v)) for v in values[name].ravel())
        dense = f"dense<[{flat}]> : tensor<{values[name].size}xf64>"
        # Parameters are written flat and reshaped, so any rank is easy.
        lines.append(f"loom.parameter @{name}_flat trainable : tensor<{values[name].size}xf64> = {dense}")
    args = ", ".join(
        f"%{n}: tensor<{''.join(f'{d}x' for d in a.shape)}i64> {{onnx.name = \"{n}\"}}"
        for n, a in inputs.items())
    lines.append(f"func.func @forward({args}) -> (tensor<f64> {{onnx.name = \"loss\"}}) {{")
    for name, shape, _, _ in params:
        size = values[name].size
        lines.append(f"  %F{name} = loom.param @{name}_flat : tensor<{size}xf64>")
        lines.append(f"  %P{name} = loom.reshape %F{name} : tensor<{size}xf64> -> {mlir_type(shape)}")
    lines.append(body.strip("\n"))
    lines.append("  return %l : tensor<f64>")
    lines.append("}")
    return "\n".join(lines) + "\n"


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"{' '.join(cmd)}\n{result.stderr}")
    return result


def loss_of(args, work, tag, text, inputs):
    path = os.path.join(work, f"{tag}.mlir")
    with open(path, "w") as f:
        f.write(text)
    out = os.path.join(work, f"{tag}.out")
    cmd = [args.loom_run, path, "--output-dir", out]
    for name in inputs:
        cmd += ["--input", f"{name}={os.path.join(work, name + '.npy')}"]
    run(cmd)
    return float(np.load(os.path.join(out, "loss.npy")))


def check_case(args, name, case, work):
    params, inputs, body = case[:3]
    options = {"h": 1e-6, "atol": 1e-6, "rtol": 1e-5}
    options.update(case[3] if len(case) > 3 else {})
    rng = np.random.default_rng(abs(hash(name)) % (2 ** 32))
    values = {p: rng.uniform(lo, hi, size=shape) for p, shape, lo, hi in params}
    for input_name, array in inputs.items():
        np.save(os.path.join(work, input_name + ".npy"), array)
    text = module_text(params, values, inputs, body)
    source = os.path.join(work, "model.mlir")
    with open(source, "w") as f:
        f.write(text)
    grad_module = os.path.join(work, "grad.mlir")
    run([args.loom_opt, source, "--loom-autodiff", "-o", grad_module])
    out = os.path.join(work, "grad.out")
    cmd = [args.loom_run, grad_module, "--function", "forward_grad",
           "--output-dir", out]
    for input_name in inputs:
        cmd += ["--input", f"{input_name}={os.path.join(work, input_name + '.npy')}"]
    run(cmd)
    h = options["h"]
    worst = 0.0
    failures = []
    for p, shape, _, _ in params:
        grad = np.load(os.path.join(out, f"grad.{p}_flat.npy")).reshape(shape)
        for index in np.ndindex(*shape):
            plus = {k: v.copy() for k, v in values.items()}
            minus = {k: v.copy() for k, v in values.items()}
            plus[p][index] += h
            minus[p][index] -= h
            fd = (loss_of(args, work, "plus", module_text(params, plus, inputs, body), inputs)
                  - loss_of(args, work, "minus", module_text(params, minus, inputs, body), inputs)) / (2 * h)
            err = abs(grad[index] - fd)
            worst = max(worst, err)
            if err > options["atol"] + options["rtol"] * abs(fd):
                failures.append(f"d/d{p}{list(index)}: autodiff {grad[index]:.9g}, finite difference {fd:.9g}")
    return worst, failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True,
                        help="directory of loom-opt and loom-run")
    parser.add_argument("--filter", default="")
    parser.add_argument("-j", type=int, default=2)
    args = parser.parse_args()
    args.loom_opt = os.path.join(args.bin, "loom-opt")
    args.loom_run = os.path.join(args.bin, "loom-run")
    names = [n for n in CASES if re.search(args.filter, n)]
    status = 0
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(args.j) as pool:
        futures = {}
        for name in names:
            work = os.path.join(tmp, name)
            os.makedirs(work)
            futures[name] = pool.submit(check_case, args, name, CASES[name], work)
        for name in names:
            try:
                worst, failures = futures[name].result()
            except RuntimeError as error:
                print(f"{name}: ERROR {error}")
                status = 1
                continue
            print(f"{name}: {'ok' if not failures else 'FAIL'} "
                  f"(largest difference from finite differences {worst:.2g})")
            for failure in failures:
                print(f"  {failure}")
            status |= bool(failures)
    print(f"{len(names)} cases, {'all passed' if not status else 'FAILURES'}")
    return status


if __name__ == "__main__":
    sys.exit(main())
