#!/usr/bin/env python3
"""Helper for benchmarks/cpu-training/run.sh (run with /usr/bin/python3:
torch 1.13 / onnx / numpy).

  bench.py prepare --dir DIR [model/shape flags]
      Exports the GPT with examples/gpt/export_for_training.py (training-mode
      ONNX, opset 17, fixed seed) to DIR/gpt.onnx, checks that a seeded
      rebuild of the model (what `torch-train` trains) has exactly the
      exported initializers, and writes one fixed batch: DIR/idx.npy and
      DIR/labels.npy (int64 [batch, seq], random tokens, seed + 1). Every
      training step of both sides uses this whole batch (loom-run: S = B
      samples). Prints "params: N (X MiB f32)" and
      "state: X MiB (parameters + gradients + AdamW moments)".

  bench.py torch-train --dir DIR --threads T --steps N --metrics FILE.jsonl
      The PyTorch side, meant to run as its own process (see peak-rss): the
      same seeded model, torch.set_num_threads(T), N steps of
          logits = model(idx); loss = F.cross_entropy(flat logits, flat labels)
          loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
      with torch.optim.AdamW(lr, betas (0.9, 0.999), eps 1e-8, weight decay
      0.01: loom-run's defaults). Writes one JSON line per step in loom-run's
      --metrics format: {"step", "loss", "step_ms", "samples_per_s"}, loss
      of the step's forward pass (before its update), step_ms from the
      forward to the end of zero_grad. set_to_none=True is torch >= 2.0's
      default (1.13 defaults to zero-filling the gradients in place).

  bench.py torch-bare
      Imports what torch-train imports (torch, onnx via the exporter module,
      numpy) and exits: the bare PyTorch process whose peak RSS run.sh
      subtracts.

  bench.py peak-rss OUT.json -- COMMAND [ARGS...]
      Runs COMMAND as the only child of this process and writes
      {"maxrss_kib", "wall_s", "rc"} to OUT.json, where maxrss_kib is
      getrusage(RUSAGE_CHILDREN).ru_maxrss: the peak resident set of COMMAND
      (Linux counts the pre-exec copy of this small Python process too, about
      10 MiB, which is why run.sh also measures bare processes the same way).
      Exits with COMMAND's status.

  bench.py summary --dir DIR --threads "1 2" [--skip-warmup 2 --tol 1e-4
      --loss-tol 1e-2 --no-loom]
      Reads DIR/{torch,loom}_T.jsonl and DIR/*.rss.json and prints, per
      thread count, the median step_ms over the steps after the first
      --skip-warmup, the ratio PyTorch / Loom (> 1: Loom faster), and peak
      RSS with and without the bare process. Checks Loom's losses against
      PyTorch's (same weights, batch, optimizer): step 0 within --tol, every
      step within --loss-tol (float rounding differs, and AdamW's update
      amplifies it step by step); exits 1 otherwise.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
gpt_dir = os.path.join(root, "examples", "gpt")
sys.path.insert(0, os.path.join(root, "examples"))
sys.path.insert(0, gpt_dir)


def add_model_flags(q):
    q.add_argument("--model", choices=["gpt", "llama"], default="gpt",
                   help="gpt: examples/gpt; llama: examples/zoo's LLaMA "
                   "(RMSNorm, rotary, SwiGLU, grouped-query attention with "
                   "heads/2 key-value heads, MLP width 688/256 of embd)")
    q.add_argument("--vocab", type=int, default=8192)
    q.add_argument("--block-size", type=int, default=128)
    q.add_argument("--layers", type=int, default=4)
    q.add_argument("--heads", type=int, default=4)
    q.add_argument("--embd", type=int, default=256)
    q.add_argument("--seed", type=int, default=0)


def build_model(args):
    if args.model == "llama":
        import torch
        sys.path.insert(0, os.path.join(root, "examples", "zoo"))
        from models import Llama
        torch.manual_seed(args.seed)
        model = Llama(args.vocab, args.embd, args.layers, args.heads,
                      max(1, args.heads // 2), args.embd * 688 // 256,
                      args.block_size)
    else:
        from export_for_training import build_model as build  # seeded GPT
        model = build(args)
    model.train()
    return model


def export_llama(args, onnx_path):
    """The LLaMA as export_for_training.py exports the GPT: training mode,
    opset 17, no constant folding, one batch of `seq` tokens."""
    import torch
    model = build_model(args)
    example = torch.zeros(args.batch, args.seq, dtype=torch.int64)
    torch.onnx.export(model, (example,), onnx_path, opset_version=17,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=["idx"],
                      output_names=["logits"])
    return 0


def prepare(args):
    import onnx
    from onnx import numpy_helper

    if args.seq > args.block_size:
        sys.exit(f"error: seq {args.seq} > block size {args.block_size}")
    os.makedirs(args.dir, exist_ok=True)
    onnx_path = os.path.join(args.dir, "gpt.onnx")
    if args.model == "llama":
        rc = export_llama(args, onnx_path)
    else:
        cmd = [sys.executable, os.path.join(gpt_dir, "export_for_training.py"),
               onnx_path, "--vocab", str(args.vocab),
               "--block-size", str(args.block_size), "--layers",
               str(args.layers), "--heads", str(args.heads), "--embd",
               str(args.embd), "--seed", str(args.seed)]
        rc = subprocess.call(cmd)
    if rc:
        return rc

    import torch
    model = build_model(args)
    exported = {t.name: numpy_helper.to_array(t)
                for t in onnx.load(onnx_path).graph.initializer}
    state = model.state_dict()
    if set(exported) != set(state) or any(
            not np.array_equal(exported[k], state[k].numpy()) for k in state):
        print("error: the seeded model differs from the exported initializers",
              file=sys.stderr)
        return 1

    gen = torch.Generator().manual_seed(args.seed + 1)
    shape = (args.batch, args.seq)
    idx = torch.randint(0, args.vocab, shape, dtype=torch.int64, generator=gen)
    labels = torch.randint(0, args.vocab, shape, dtype=torch.int64,
                           generator=gen)
    np.save(os.path.join(args.dir, "idx.npy"), idx.numpy())
    np.save(os.path.join(args.dir, "labels.npy"), labels.numpy())
    n = sum(p.numel() for p in model.parameters())
    print(f"params: {n} ({n * 4 / 2**20:.1f} MiB f32)")
    print(f"state: {4 * n * 4 / 2**20:.1f} MiB (parameters + gradients + "
          f"AdamW moments, f32)")
    return 0


def torch_train(args):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    model = build_model(args)
    idx = torch.from_numpy(np.load(os.path.join(args.dir, "idx.npy")))
    labels = torch.from_numpy(np.load(os.path.join(args.dir, "labels.npy")))
    batch = idx.shape[0]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr,
                            betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    with open(args.metrics, "w") as f:
        for step in range(args.steps):
            start = time.perf_counter()
            logits = model(idx)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                   labels.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            ms = (time.perf_counter() - start) * 1e3
            value = loss.item()
            del logits, loss
            f.write(json.dumps({"step": step, "loss": value, "step_ms": ms,
                                "samples_per_s": batch / ms * 1e3}) + "\n")
            print(f"step {step + 1}/{args.steps} loss {value:.4f} {ms:.1f} ms",
                  flush=True)
    return 0


def torch_bare(args):
    import torch  # noqa: F401
    import export_for_training  # noqa: F401
    return 0


def peak_rss(args):
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        sys.exit("error: peak-rss needs a command")
    start = time.perf_counter()
    rc = subprocess.call(cmd)
    wall = time.perf_counter() - start
    kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(args.out, "w") as f:
        json.dump({"maxrss_kib": kib, "wall_s": wall, "rc": rc}, f)
    return rc


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def read_rss(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def summary(args):
    d = args.dir
    threads = args.threads.split()
    mib = lambda r: r["maxrss_kib"] / 1024  # noqa: E731
    bare = {side: read_rss(os.path.join(d, f"{side}_bare.rss.json"))
            for side in ("torch", "loom")}
    status = 0

    def step_ms(rows):
        timed = rows[args.skip_warmup:] or rows
        return statistics.median(r["step_ms"] for r in timed), len(timed)

    print(f"{'':24s}{'ms per step':>12s}{'peak RSS':>12s}{'- bare':>10s}"
          f"{'wall':>9s}")
    for t in threads:
        rows = {}
        for side, label in (("torch", "PyTorch eager"), ("loom", "Loom")):
            metrics = os.path.join(d, f"{side}_{t}.jsonl")
            rss = read_rss(os.path.join(d, f"{side}_{t}.rss.json"))
            name = f"{label}, {t} thr"
            if side == "loom" and args.no_loom:
                print(f"  {name:22s}{'skipped':>12s}")
                continue
            if not os.path.exists(metrics) or (rss and rss["rc"]):
                print(f"  {name:22s}{'FAILED':>12s}   (see {side}_{t}.log)")
                status = 1
                continue
            rows[side] = read_jsonl(metrics)
            ms, n = step_ms(rows[side])
            rss_s = f"{mib(rss):9.0f} MiB" if rss else f"{'?':>12s}"
            net = (f"{mib(rss) - mib(bare[side]):6.0f} MiB"
                   if rss and bare[side] else f"{'?':>10s}")
            wall = f"{rss['wall_s']:7.1f} s" if rss else ""
            print(f"  {name:22s}{ms:12.2f}{rss_s:>12s}{net:>10s}{wall:>9s}"
                  f"   (median of {n} steps)")
        if "torch" in rows and "loom" in rows:
            t_ms, _ = step_ms(rows["torch"])
            l_ms, _ = step_ms(rows["loom"])
            print(f"  {'ratio PyTorch / Loom':22s}{t_ms / l_ms:12.2f}"
                  f"   (> 1: Loom faster)")
            a = [r["loss"] for r in rows["torch"]]
            b = [r["loss"] for r in rows["loom"]]
            n = min(len(a), len(b))
            diffs = [abs(x - y) for x, y in zip(a, b)]
            ok = (n == len(a) == len(b) and all(np.isfinite(b))
                  and diffs[0] <= args.tol and max(diffs) <= args.loss_tol)
            print(f"  losses: step 0 PyTorch {a[0]:.6f} Loom {b[0]:.6f} "
                  f"(diff {diffs[0]:.2e}, tol {args.tol:g}); max diff over "
                  f"{n} steps {max(diffs):.2e} (tol {args.loss_tol:g}); "
                  f"last {a[-1]:.4f} / {b[-1]:.4f} "
                  f"{'OK' if ok else 'MISMATCH'}")
            status |= 0 if ok else 1
    for side, label in (("torch", "PyTorch: python, import torch + onnx"),
                        ("loom", "Loom: loom-run --help")):
        if bare[side]:
            print(f"bare process, {label}: {mib(bare[side]):.0f} MiB")
    return status


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("prepare")
    q.add_argument("--dir", required=True)
    add_model_flags(q)
    q.add_argument("--batch", type=int, default=8)
    q.add_argument("--seq", type=int, default=128)
    t = sub.add_parser("torch-train")
    t.add_argument("--dir", required=True)
    add_model_flags(t)
    t.add_argument("--threads", type=int, default=os.cpu_count())
    t.add_argument("--steps", type=int, default=12)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--metrics", required=True)
    sub.add_parser("torch-bare")
    r = sub.add_parser("peak-rss")
    r.add_argument("out")
    r.add_argument("command", nargs=argparse.REMAINDER)
    s = sub.add_parser("summary")
    s.add_argument("--dir", required=True)
    s.add_argument("--threads", required=True, help='e.g. "1 2"')
    s.add_argument("--skip-warmup", type=int, default=2)
    s.add_argument("--tol", type=float, default=1e-4)
    s.add_argument("--loss-tol", type=float, default=1e-2)
    s.add_argument("--no-loom", action="store_true")
    args = p.parse_args()
    return {"prepare": prepare, "torch-train": torch_train,
            "torch-bare": torch_bare, "peak-rss": peak_rss, "summary": summary}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
