#!/usr/bin/env python3
"""Loom's CUDA attention kernels against PyTorch's on the same GPU.

    bench.py --loom-bench BIN [--batch 8] [--heads 12] [--seq 1024]
        [--dim 64] [--iters 20] [--warmup 3] [--no-torch]

Runs BIN (loom-bench-attention: Loom's `attention` and `attention_backward`
kernels on GPT-2's operands, checked against a double-precision reference
before they are timed), then the same causal attention in PyTorch:

  - torch.nn.functional.scaled_dot_product_attention with is_causal=True
    (the flash backend where PyTorch has it), what a PyTorch user would
    call;
  - the GPT-2 example model's own code (q k^T, masked_fill, softmax, @ v
    under torch.autocast), what the GPT-2 training benchmark's PyTorch
    eager side runs.

It prints the forward and backward times of each, side by side, with
TFLOP/s counting what a causal attention computes (half of the dense
4 B H S^2 D forward and 10 B H S^2 D backward FLOPs), and Loom's ratio to
each (> 1: Loom faster). The backward of PyTorch is timed as
torch.autograd.grad of a retained forward graph.
"""
import argparse
import math
import re
import subprocess
import sys


def run_loom(args):
    command = [args.loom_bench, "--batch", str(args.batch), "--heads",
               str(args.heads), "--seq", str(args.seq), "--dim",
               str(args.dim), "--iters", str(args.iters), "--warmup",
               str(args.warmup)]
    print("+ " + " ".join(command), flush=True)
    result = subprocess.run(command, capture_output=True, text=True)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.returncode != 0:
        sys.exit("bench.py: loom-bench-attention failed (exit %d)" %
                 result.returncode)
    times = dict(re.findall(r"^(forward|backward)\s+([0-9.]+) ms",
                            result.stdout, re.M))
    if set(times) != {"forward", "backward"}:
        sys.exit("bench.py: no timings in loom-bench-attention's output")
    return float(times["forward"]), float(times["backward"])


def time_ms(torch, fn, warmup, iters):
    for _ in range(warmup):
        fn()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / iters


def run_torch(args):
    import torch
    import torch.nn.functional as F

    B, H, S, D = args.batch, args.heads, args.seq, args.dim
    torch.manual_seed(0)

    def operands():
        q, k, v = (torch.randn(B, H, S, D, device="cuda",
                               dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        return q, k, v, torch.randn(B, H, S, D, device="cuda",
                                    dtype=torch.bfloat16)

    def measure(forward):
        q, k, v, dout = operands()
        forward_ms = time_ms(torch, lambda: forward(q, k, v), args.warmup,
                             args.iters)
        out = forward(q, k, v)
        backward_ms = time_ms(
            torch, lambda: torch.autograd.grad(out, (q, k, v), dout,
                                               retain_graph=True),
            args.warmup, args.iters)
        return forward_ms, backward_ms

    rows = []
    sdpa = lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                          is_causal=True)
    label = "PyTorch SDPA"
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            rows.append((label + " (flash)", measure(sdpa)))
    except (ImportError, RuntimeError) as error:
        print("SDPA's flash backend unavailable (%s); its default" % error)
        rows.append((label, measure(sdpa)))

    mask = torch.tril(torch.ones(S, S, device="cuda")).view(1, 1, S, S)

    def gpt_model_attention(q, k, v):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
            att = att.masked_fill(mask == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            return att @ v

    rows.append(("PyTorch eager (GPT-2 model's code)",
                 measure(gpt_model_attention)))
    return rows, torch.cuda.get_device_name()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loom-bench", required=True)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args()

    loom = run_loom(args)
    rows = [("Loom flash kernels", loom)]
    device = ""
    if not args.no_torch:
        torch_rows, device = run_torch(args)
        rows += torch_rows

    B, H, S, D = args.batch, args.heads, args.seq, args.dim
    flops = (4.0 * B * H * S * S * D / 2, 10.0 * B * H * S * S * D / 2)
    print()
    print("causal attention, B %d, H %d, S %d, D %d, bf16%s" %
          (B, H, S, D, ", " + device if device else ""))
    print("%-38s %12s %8s %12s %8s" % ("", "forward ms", "TFLOP/s",
                                        "backward ms", "TFLOP/s"))
    for name, (forward_ms, backward_ms) in rows:
        print("%-38s %12.4f %8.1f %12.4f %8.1f" %
              (name, forward_ms, flops[0] / forward_ms / 1e9, backward_ms,
               flops[1] / backward_ms / 1e9))
    for name, (forward_ms, backward_ms) in rows[1:]:
        print("Loom / %s: forward %.2f, backward %.2f, both %.2f "
              "(> 1: Loom faster)" %
              (name, forward_ms / loom[0], backward_ms / loom[1],
               (forward_ms + backward_ms) / (loom[0] + loom[1])))


if __name__ == "__main__":
    main()
