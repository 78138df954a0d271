#!/usr/bin/env python3
"""Estimates where a plan's step time goes, from the plan alone (no device).

    plan-traffic.py PLAN [--rank R] [--bandwidth GBS] [--tflops T]
        [--launch-us U] [--top N]

Every kernel instruction is charged the bytes of its operands (each input
read once, each output written once) and, for a matmul, 2 M N K FLOPs
(for the fused attention kernels, those of their products);
its estimated time is max(bytes / bandwidth, FLOPs / tflops) plus a launch
overhead. This is the roofline of a kernel that moves its operands exactly
once, so it is a lower bound for what the runtime does, and it ignores
caches (a row re-read from L2 is free here). It is meant for comparing two
plans of one model (did a compiler change cut the traffic?) and for
finding the big movers without a GPU; `loom-run --report` measures.

Defaults are an H200's order of magnitude: 3500 GB/s achieved of 4800 GB/s
HBM bandwidth, 650 TFLOP/s achieved by large bf16 GEMMs, 3 us per launch.
Collectives are counted (bytes of their operands) but not timed.

Prints the totals, the time per kernel kind, the top N ONNX node paths
(layer numbers folded: /h.3/attn/MatMul counts as /h.N/attn/MatMul), and
the matmuls with an operand whose rows are not a multiple of 16 bytes
(cuBLASLt's fastest tensor-core kernels need 16-byte aligned leading
dimensions; a vocabulary of 50257 is the usual case, which padding the
dimension to a multiple of 8 avoids).
"""
import argparse
import collections
import re
import sys

DTYPE_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i1": 1, "i32": 4,
               "i64": 8}
REF = re.compile(r"^[aw]\d+:(\w+)\[([0-9,]*)\]$")
LOC = re.compile(r'loc "((?:[^"\\]|\\.)*)"')
LAYER = re.compile(r"(?<=[./])\d+(?=[./]|$)")


def read_header(path):
    """The plan's text lines, up to its data section."""
    lines = []
    with open(path, "rb") as f:
        if not f.read(9) == b"loom-plan":
            sys.exit("plan-traffic: %s is not a plan (no loom-plan magic)" %
                     path)
        f.seek(0)
        for raw in f:
            if raw.startswith(b"data "):
                break
            lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
    return lines


def parse_ref(token):
    """(bytes, dims, dtype) of a REF token, or None for any other token."""
    match = REF.match(token)
    if not match or match.group(1) not in DTYPE_BYTES:
        return None
    dims = [int(d) for d in match.group(2).split(",") if d]
    count = 1
    for d in dims:
        count *= d
    return count * DTYPE_BYTES[match.group(1)], dims, match.group(1)


class Instruction:
    def __init__(self, line):
        head, _, tail = line.partition(" -> ")
        words = head.split()
        self.kind, self.kernel = words[0], words[1]
        self.inputs = [r for r in map(parse_ref, words[2:]) if r]
        outputs, attrs = [], {}
        for token in tail.split(" loc ")[0].split():
            ref = parse_ref(token)
            if ref:
                outputs.append(ref)
            elif "=" in token:
                key, _, value = token.partition("=")
                attrs[key] = value
        self.outputs = outputs
        self.attrs = attrs
        match = LOC.search(tail)
        self.loc = match.group(1) if match else "(no location)"
        self.bytes = sum(ref[0] for ref in self.inputs + self.outputs)
        self.flops = 0
        if self.kernel == "matmul" and self.inputs and self.outputs:
            lhs = self.inputs[0][1]
            k = lhs[-2] if attrs.get("transpose_lhs") == "1" else lhs[-1]
            count = 1
            for d in self.outputs[0][1]:
                count *= d
            self.flops = 2 * count * k
        elif self.kernel in ("attention", "attention_backward"):
            # q [..., Sq, D], k [..., Sk, D], v [..., Sk, Dv] (with
            # seq_major=1 [..., S, H, D]): the forward multiplies twice
            # (q k^T, p v), the backward five times (s again, dout v^T,
            # p^T dout, ds k, ds^T q). Masked tiles a kernel skips are not
            # subtracted. With packed_qkv=1 input 0 is qkv [..., S, 3, H, D].
            if attrs.get("packed_qkv") == "1":
                part = list(self.inputs[0][1])
                del part[-3]
                q, k, v = list(part), list(part), list(part)
            else:
                q, k, v = (list(ref[1]) for ref in self.inputs[:3])
            if attrs.get("seq_major") == "1":
                for x in (q, k, v):
                    x[-3], x[-2] = x[-2], x[-3]
            batch = 1
            for d in q[:-2]:
                batch *= d
            sq, sk, d, dv = q[-2], k[-2], q[-1], v[-1]
            products = (d + dv) if self.kernel == "attention" else \
                (3 * d + 2 * dv)
            self.flops = 2 * batch * sq * sk * products


def instructions_of_rank(lines, rank):
    found, current = False, None
    for line in lines:
        words = line.split()
        if not words:
            continue
        if words[0] == "rank":
            current = int(words[1])
            found = found or current == rank
            continue
        if current == rank and words[0] in ("kernel", "collective"):
            yield Instruction(line)
    if not found:
        sys.exit("plan-traffic: the plan has no rank %d" % rank)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--bandwidth", type=float, default=3500.0,
                        help="achieved memory bandwidth, GB/s")
    parser.add_argument("--tflops", type=float, default=650.0,
                        help="achieved GEMM rate, TFLOP/s")
    parser.add_argument("--launch-us", type=float, default=3.0)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    instructions = list(instructions_of_rank(read_header(args.plan),
                                             args.rank))

    def seconds(inst):
        if inst.kind != "kernel":
            return 0.0
        return (max(inst.bytes / (args.bandwidth * 1e9),
                    inst.flops / (args.tflops * 1e12)) +
                args.launch_us * 1e-6)

    kernels = [i for i in instructions if i.kind == "kernel"]
    total_bytes = sum(i.bytes for i in kernels)
    total_flops = sum(i.flops for i in kernels)
    total = sum(seconds(i) for i in kernels)
    print("rank %d: %d kernels, %d collectives" %
          (args.rank, len(kernels), len(instructions) - len(kernels)))
    print("traffic %.3f GB, matmul %.4g TFLOP, estimated %.3f ms "
          "(%.0f GB/s, %.0f TFLOP/s, %.1f us per launch)" %
          (total_bytes / 1e9, total_flops / 1e12, total * 1e3,
           args.bandwidth, args.tflops, args.launch_us))

    by_kernel = collections.OrderedDict()
    for inst in instructions:
        row = by_kernel.setdefault(inst.kernel, [0, 0, 0.0])
        row[0] += 1
        row[1] += inst.bytes
        row[2] += seconds(inst)
    print()
    print("%-16s %6s %12s %12s %7s" % ("kernel", "calls", "GB", "est. ms",
                                       "share"))
    for name, (calls, nbytes, secs) in sorted(by_kernel.items(),
                                              key=lambda kv: -kv[1][2]):
        print("%-16s %6d %12.3f %12.3f %6.1f%%" %
              (name, calls, nbytes / 1e9, secs * 1e3,
               100 * secs / total if total else 0.0))

    by_loc = collections.OrderedDict()
    for inst in kernels:
        key = (LAYER.sub("N", inst.loc), inst.kernel)
        row = by_loc.setdefault(key, [0, 0, 0.0])
        row[0] += 1
        row[1] += inst.bytes
        row[2] += seconds(inst)
    print()
    print("top %d node paths (layers folded):" % args.top)
    print("%10s %6s %10s  %-14s %s" % ("est. ms", "calls", "GB", "kernel",
                                       "location"))
    ranked = sorted(by_loc.items(), key=lambda kv: -kv[1][2])[:args.top]
    for (loc, kernel), (calls, nbytes, secs) in ranked:
        print("%10.3f %6d %10.3f  %-14s %s" %
              (secs * 1e3, calls, nbytes / 1e9, kernel, loc))

    # Matmul operands (A, B, C) whose rows are not 16-byte multiples.
    unaligned = collections.OrderedDict()
    for inst in kernels:
        if inst.kernel != "matmul":
            continue
        # Inputs A, B[, bias][, addend] or A, B, X (activation_grad); the
        # addend and X have C's rows.
        if inst.attrs.get("activation_grad"):
            names = ["A", "B", "X"]
        elif inst.attrs.get("accumulate") == "1":
            names = ["A", "B", "bias", "addend"][:len(inst.inputs)]
        else:
            names = ["A", "B", "bias"][:len(inst.inputs)]
        names += ["C"]
        refs = inst.inputs + inst.outputs[:1]
        shapes = ["%s %s[%s]" % (name, dtype, ",".join(map(str, dims)))
                  for name, (_, dims, dtype) in zip(names, refs)
                  if name != "bias" and dims and
                  dims[-1] * DTYPE_BYTES[dtype] % 16]
        if not shapes:
            continue
        row = unaligned.setdefault(LAYER.sub("N", inst.loc), [0, 0.0, set()])
        row[0] += 1
        row[1] += seconds(inst)
        row[2].update(shapes)
    if unaligned:
        print()
        print("matmuls with rows that are not 16-byte multiples:")
        print("%10s %6s  %s" % ("est. ms", "calls", "location: operands"))
        for loc, (calls, secs, shapes) in sorted(unaligned.items(),
                                                 key=lambda kv: -kv[1][1]):
            print("%10.3f %6d  %s: %s" %
                  (secs * 1e3, calls, loc, ", ".join(sorted(shapes))))


if __name__ == "__main__":
    main()
