#!/usr/bin/env python3
"""Helper for benchmarks/cpu-inference/run.sh (run with /usr/bin/python3:
torch 1.13 / onnx / numpy).

  bench.py prepare --dir DIR [model/shape/timing flags]
      Builds the nanoGPT model of examples/gpt/export_gpt.py with a fixed seed,
      exports it to DIR/gpt.onnx (opset 17, dynamic batch/seq), writes the
      input DIR/idx.npy (int64 [batch, seq]) and PyTorch's logits
      DIR/logits_torch.npy, and times PyTorch CPU eager inference of the same
      model and weights under torch.no_grad() with torch.set_num_threads(T):
      warm-up runs, then N timed runs. Prints one line
        torch: mean X ms  median Y ms  min Z ms  (N runs, T threads)
      and, with --profile, torch.profiler's op breakdown (self CPU time).

  bench.py compare REF.npy OUT.npy --tol 1e-4
      Prints the max abs difference; exits 1 if it exceeds --tol, or the
      shapes differ, or OUT has non-finite values.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
sys.path.insert(0, os.path.join(root, "examples"))
sys.path.insert(0, os.path.join(root, "examples", "gpt"))


def prepare(args):
    import torch
    from export_gpt import GPT            # examples/gpt/export_gpt.py
    from onnx_export import export        # examples/onnx_export.py

    if args.seq > args.block_size:
        sys.exit(f"error: seq {args.seq} > block size {args.block_size}")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = GPT(args.vocab, args.block_size, args.layers, args.heads, args.embd)
    model.eval()
    gen = torch.Generator().manual_seed(args.seed + 1)
    idx = torch.randint(0, args.vocab, (args.batch, args.seq),
                        dtype=torch.int64, generator=gen)

    os.makedirs(args.dir, exist_ok=True)
    onnx_path = os.path.join(args.dir, "gpt.onnx")
    export_args = argparse.Namespace(out=onnx_path, opset=17,
                                     save_reference=None)
    rc = export(model, (idx,), ["idx"], ["logits"],
                {"idx": {0: "batch", 1: "seq"},
                 "logits": {0: "batch", 1: "seq"}}, export_args)
    if rc:
        return rc

    with torch.no_grad():
        logits = model(idx)
        np.save(os.path.join(args.dir, "idx.npy"), idx.numpy())
        np.save(os.path.join(args.dir, "logits_torch.npy"), logits.numpy())

        for _ in range(args.warmup):
            model(idx)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            model(idx)
            times.append((time.perf_counter() - start) * 1e3)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"params: {n_params} ({n_params * 4 / 2**20:.1f} MiB f32)")
    print(f"torch: mean {statistics.mean(times):.3f} ms  "
          f"median {statistics.median(times):.3f} ms  "
          f"min {min(times):.3f} ms  ({args.runs} runs, {args.threads} threads)")

    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.profile):
                model(idx)
        print(f"torch.profiler, {args.profile} runs (times are totals):")
        print(prof.key_averages().table(sort_by="self_cpu_time_total",
                                        row_limit=args.profile_rows))
    return 0


def compare(args):
    ref = np.load(args.ref)
    out = np.load(args.out)
    if ref.shape != out.shape:
        print(f"max abs diff: shape mismatch {ref.shape} vs {out.shape}")
        return 1
    if not np.isfinite(out).all():
        print("max abs diff: loom output has non-finite values")
        return 1
    diff = float(np.max(np.abs(ref.astype(np.float64) - out.astype(np.float64))))
    ok = diff <= args.tol
    print(f"max abs diff: {diff:.3e} (tolerance {args.tol:g}, "
          f"|logits| max {float(np.max(np.abs(ref))):.3g}) "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("prepare")
    q.add_argument("--dir", required=True)
    q.add_argument("--vocab", type=int, default=8192)
    q.add_argument("--block-size", type=int, default=128)
    q.add_argument("--layers", type=int, default=4)
    q.add_argument("--heads", type=int, default=4)
    q.add_argument("--embd", type=int, default=256)
    q.add_argument("--batch", type=int, default=8)
    q.add_argument("--seq", type=int, default=128)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--threads", type=int, default=os.cpu_count())
    q.add_argument("--warmup", type=int, default=5)
    q.add_argument("--runs", type=int, default=20)
    q.add_argument("--profile", type=int, default=0, metavar="RUNS",
                   help="also print torch.profiler's op table over RUNS runs")
    q.add_argument("--profile-rows", type=int, default=15)
    c = sub.add_parser("compare")
    c.add_argument("ref")
    c.add_argument("out")
    c.add_argument("--tol", type=float, default=1e-4)
    args = p.parse_args()
    return {"prepare": prepare, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
