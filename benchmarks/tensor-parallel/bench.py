#!/usr/bin/env python3
"""Helper for benchmarks/tensor-parallel/run.sh (run with /usr/bin/python3:
numpy and onnx).

  bench.py shapes-only-gpt --out DIR/gpt.onnx [--layers --embd --heads
      --vocab --seq]
      A GPT of the given shape as benchmarks/onnx-import/make_gpt_onnx.py
      builds it (same graph: LayerNorm, fused QKV, causal softmax, exact
      GELU, untied lm_head), but without weights: every initializer is ONNX
      external data in OUT.data, which is a sparse file of the full length
      (no byte written, no disk used), so importing and compiling the model
      costs what the real one would, short of reading weights. Prints the
      parameter count.

  bench.py steps --metrics A.jsonl [--metrics B.jsonl ...] --names "one tp2"
      [--skip-warmup 2]
      Median step_ms of each --metrics file over the steps after the first
      --skip-warmup, side by side, and the largest relative difference of
      each run's losses from the first run's.

  bench.py sgemm
      numpy's float32 matrix product of the benchmark GPT's lm_head shape
      (1024 x 256 times 256 x 8192), best of 5: prints GFLOP/s, a yardstick
      of how fast this machine is right now (run.sh pins one thread).

  bench.py comm --plan FILE --tp T --layers L --batch B --seq S --hidden H
      [--vocab V] [--report-json FILE]
      Communication per rank per step. From the plan: every `collective`
      line of each rank's program, its payload (the output's bytes for
      all_gather, the input's for the others) summed by kind, and the bytes
      a ring algorithm sends for it (all_reduce 2(t-1)/t of the payload,
      all_gather and reduce_scatter (t-1)/t, broadcast 1x). From
      --report-json (loom-run --report-json, if this build has it): the
      measured comm_bytes of each rank. Next to them Megatron's count
      (Shoeybi et al. 2019, sec. 3): per layer and microbatch 4 all-reduces
      of b*s*h elements (forward: after attention and after the MLP;
      backward: the input gradients of both blocks), plus one for the
      vocabulary-parallel embedding's forward output and one for the
      LM head's input gradient; the cross-entropy's b*s-element reductions
      (max and sum over the split vocabulary) are left out. Dtype f32.
"""

import argparse
import json
import os
import re
import statistics
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "onnx-import"))


# -- shapes-only-gpt ---------------------------------------------------------

class SparseWriter:
    """make_gpt_onnx.ExternalWriter's interface: external data entries at
    64-byte aligned offsets, but nothing written; close() extends the file
    to its length (a hole)."""

    def __init__(self, data_path, np_dtype):
        from onnx import mapping
        self.path = data_path
        self.location = os.path.basename(data_path)
        self.np_dtype = np.dtype(np_dtype)
        self.onnx_dtype = mapping.NP_TYPE_TO_TENSOR_TYPE[self.np_dtype]
        self.offset = self.count = self.numel = 0

    def tensor(self, name, shape, fill="normal"):
        from onnx import TensorProto
        self.offset += -self.offset % 64
        n = int(np.prod(shape))
        length = n * self.np_dtype.itemsize
        t = TensorProto(name=name, dims=list(shape),
                        data_type=self.onnx_dtype)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.location),
                           ("offset", str(self.offset)),
                           ("length", str(length))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        self.offset += length
        self.count += 1
        self.numel += n
        return t

    def close(self):
        with open(self.path, "wb") as f:
            f.truncate(self.offset)


def shapes_only_gpt(args):
    import onnx
    import make_gpt_onnx
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    writer = SparseWriter(args.out + ".data", "float32")
    shape = argparse.Namespace(layers=args.layers, embd=args.embd,
                               heads=args.heads, vocab=args.vocab,
                               seq=args.seq, block=args.seq, opset=17)
    model = make_gpt_onnx.GraphBuilder(writer, shape).build()
    writer.close()
    onnx.save(model, args.out)
    print("params: %d (%.1f B; %.0f GiB f32, not written)" % (
        writer.numel, writer.numel / 1e9, writer.offset / 2**30))
    return 0


# -- steps --------------------------------------------------------------------

def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def steps(args):
    names = args.names.split()
    if len(names) != len(args.metrics):
        sys.exit("--names needs one name per --metrics")
    runs = [read_metrics(path) for path in args.metrics]
    first = [row["loss"] for row in runs[0]]
    print("%-34s %10s %8s %16s" % ("run", "ms/step", "speedup",
                                    "losses vs first"))
    base = None
    for name, rows in zip(names, runs):
        timed = [row["step_ms"] for row in rows[args.skip_warmup:]] or \
            [row["step_ms"] for row in rows]
        ms = statistics.median(timed)
        base = base or ms
        diff = max(abs(row["loss"] - ref) / abs(ref)
                   for row, ref in zip(rows, first))
        print("%-34s %10.1f %7.2fx %16.2g" % (name, ms, base / ms, diff))
    return 0


# -- comm ---------------------------------------------------------------------

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i64": 8, "i32": 4,
               "i8": 1, "i1": 1, "u8": 1}
REF = re.compile(r"a\d+:(\w+)\[([\d,]*)\]")


def ref_bytes(text):
    match = REF.match(text)
    if not match:
        return 0
    dims = [int(d) for d in match.group(2).split(",") if d]
    return int(np.prod(dims, dtype=np.int64)) * DTYPE_BYTES.get(
        match.group(1), 4)


def plan_collectives(path):
    """{rank: {kind: [payload bytes, ...]}} of the plan's collective lines."""
    ranks, rank = {}, None
    with open(path, "rb") as f:
        for raw in f:
            if raw.startswith(b"rank "):
                rank = int(raw.split()[1])
                ranks[rank] = {}
            elif raw.startswith(b"collective ") and rank is not None:
                words = raw.decode("utf-8", "replace").split()
                kind = words[1]
                arrow = words.index("->")
                inputs, outputs = words[2:arrow], words[arrow + 1:]
                side = outputs if kind == "all_gather" else inputs
                payload = sum(ref_bytes(w) for w in side if w.startswith("a"))
                ranks[rank].setdefault(kind, []).append(payload)
    return ranks


def ring_factor(kind, t):
    if kind == "all_reduce":
        return 2 * (t - 1) / t
    if kind in ("all_gather", "reduce_scatter"):
        return (t - 1) / t
    return 1.0


def mib(n):
    return "%.2f MiB" % (n / 2**20)


def comm(args):
    t = args.tp
    ranks = plan_collectives(args.plan)
    if not ranks:
        sys.exit("no rank programs in " + args.plan)
    print("plan (%s), per rank per step:" % os.path.basename(args.plan))
    print("  %-5s %-16s %6s %14s %16s" % ("rank", "kind", "count",
                                          "payload", "ring sends"))
    for rank in sorted(ranks):
        total = 0.0
        for kind in sorted(ranks[rank]):
            sizes = ranks[rank][kind]
            sends = sum(sizes) * ring_factor(kind, t)
            total += sends
            print("  %-5d %-16s %6d %14s %16s" % (rank, kind, len(sizes),
                                                  mib(sum(sizes)), mib(sends)))
        print("  %-5d %-16s %6s %14s %16s" % (rank, "total", "", "",
                                              mib(total)))
    bsh = args.batch * args.seq * args.hidden * 4
    count = 4 * args.layers + 2
    print("Megatron (%d layers x 4 + embedding + LM head = %d all_reduces of"
          " b*s*h = %s):" % (args.layers, count, mib(bsh)))
    print("  %-5s %-16s %6d %14s %16s" % ("each", "all_reduce", count,
                                          mib(count * bsh),
                                          mib(count * bsh *
                                              ring_factor("all_reduce", t))))
    if args.report_json:
        with open(args.report_json) as f:
            report = json.load(f)
        print("measured (loom-run --report-json):")
        for row in report.get("ranks", []):
            kinds = row.get("comm_bytes", {})
            print("  rank %s: %s" % (row.get("rank"), ", ".join(
                "%s %s" % (k, mib(v)) for k, v in sorted(kinds.items()))
                or "no communication"))
    else:
        print("measured: TODO: loom-run has no --report-json in this build; "
              "the plan's count above is what its collectives carry")
    return 0


def memory(args):
    """Per-rank memory of several runs' --report-json, side by side: the
    model states, the planned and measured peaks, and what of the planned
    peak is not model states (activations kept for the backward, and
    workspace), which sequence parallelism divides in its regions."""
    print("  %-14s %4s %11s %11s %11s %12s %12s %14s" % (
        "run", "rank", "params", "grads", "optimizer", "planned peak",
        "measured", "peak - states"))
    for entry in args.report:
        name, path = entry.split("=", 1)
        with open(path) as f:
            report = json.load(f)
        for row in report.get("ranks", []):
            states = sum(row.get(k, 0) for k in
                         ("param_bytes", "grad_bytes", "optimizer_bytes"))
            planned = row.get("planned_peak_bytes", 0)
            print("  %-14s %4s %11s %11s %11s %12s %12s %14s" % (
                name, row.get("rank"), mib(row.get("param_bytes", 0)),
                mib(row.get("grad_bytes", 0)),
                mib(row.get("optimizer_bytes", 0)), mib(planned),
                mib(row.get("measured_peak_bytes", 0)),
                mib(planned - states)))
    return 0


def sgemm(args):
    import time
    a = np.ones((1024, 256), np.float32)
    b = np.ones((256, 8192), np.float32)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    print("%.1f" % (2 * 1024 * 256 * 8192 / best / 1e9))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("shapes-only-gpt")
    p.add_argument("--out", required=True)
    p.add_argument("--layers", type=int, default=96)
    p.add_argument("--embd", type=int, default=12288)
    p.add_argument("--heads", type=int, default=96)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--seq", type=int, default=2048)
    p = sub.add_parser("steps")
    p.add_argument("--metrics", action="append", required=True)
    p.add_argument("--names", required=True)
    p.add_argument("--skip-warmup", type=int, default=2)
    sub.add_parser("sgemm")
    p = sub.add_parser("comm")
    p.add_argument("--plan", required=True)
    p.add_argument("--tp", type=int, required=True)
    for name in ("layers", "batch", "seq", "hidden"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--report-json")
    p = sub.add_parser("memory")
    p.add_argument("--report", action="append", required=True,
                   help="NAME=REPORT.json (loom-run --report-json)")
    args = parser.parse_args()
    return {"shapes-only-gpt": shapes_only_gpt, "steps": steps,
            "memory": memory,
            "sgemm": sgemm, "comm": comm}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
