#!/usr/bin/env python3
"""One bf16 training step of a GPT-2-small-shaped model: Loom vs PyTorch eager.

    bench.py make KIT_DIR --loom-run BIN [--python PY] [model options]
    bench.py run KIT_DIR --loom-run BIN [--device cuda|cpu] [--steps 20]
        [--warmup 3] [--no-torch] [--no-graphs] [--no-tuning]
        [--peak-tflops 989] [--profile FILE]

`make` (on a machine with the full build and PyTorch) exports the model with
zeroed parameters (export_gpt2.py), compiles its AdamW training step with
`loom-run --train --precision bf16 --steps 0 --emit-plan`, and gzips the
plan into KIT_DIR (~9 MB for GPT-2 small: zeros compress), with
KIT_DIR/config.json. KIT_DIR then travels to the GPU machine.

`run` (on the GPU machine, runtime-only build) unpacks the plan, gives it
GPT-2's initialization (fill_weights.py), makes a random token data set,
trains STEPS steps with `loom-run PLAN --train --device cuda --metrics` (on
the GPU twice: kernel by kernel, and with `--cuda-graphs`, each step one
replay of the first step's recorded launches, whose losses must be the
same; --no-graphs skips that run; then once more with --tune-matmuls, each
matmul on the fastest of several cuBLASLt algorithms timed before its
first launch; --no-tuning skips that run), and runs the same model
(examples/gpt/export_gpt.GPT), batch, sequence length and optimizer in
PyTorch eager (torch.autocast bf16, torch.optim.AdamW with its default
implementation) in the same process tree on the same GPU,
twice: as written (matmul/softmax attention, what Loom imports) and with
its attention core replaced by scaled_dot_product_attention (flash). It
prints, side by side: the median step time over the steps after WARMUP,
tokens/s, the ratio Loom / PyTorch (> 1: Loom faster), and each side's
model FLOP utilization: training FLOPs per token = 3 x the forward's GEMM
FLOPs (L (24 d^2 + 4 T d) + 2 d V: projections, MLP, attention scores and
values over the full T x T square as both sides compute it, LM head) over
PEAK TFLOP/s (the H200's dense bf16 datasheet figure by default; the
achieved rate of one large bf16 matmul in PyTorch is printed as a
ceiling). The first losses of both are printed as a sanity check (both
start near ln(vocab)).

Loom's step times are printed as soon as its runs end, before PyTorch's
start; if PyTorch fails (cannot be imported, raises), the table has Loom's
rows only and the script exits 1.

--profile FILE: after the timed runs, two more Loom steps with `--report`
(each instruction timed on the device: time per kernel kind and the
slowest instructions with their ONNX nodes) go to FILE, and PyTorch's
profiler table of one step to FILE.torch.txt, for finding where the time
goes. They are separate runs, so the timed figures are not perturbed.
"""
import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def sh(command, **kwargs):
    print("+ " + " ".join(command), flush=True)
    subprocess.run(command, check=True, **kwargs)


def make(args):
    kit = os.path.abspath(args.kit_dir)
    os.makedirs(kit, exist_ok=True)
    work = os.path.join(kit, "work")
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "model.onnx")
    sh([args.python, os.path.join(HERE, "export_gpt2.py"), onnx_path,
        "--batch", str(args.batch), "--seq", str(args.seq), "--layers",
        str(args.layers), "--heads", str(args.heads), "--embd",
        str(args.embd), "--vocab", str(args.vocab), "--gelu", args.gelu])
    shape = np.zeros((args.batch, args.seq), np.int64)
    np.save(os.path.join(work, "idx.npy"), shape)
    np.save(os.path.join(work, "labels.npy"), shape)
    plan = os.path.join(work, "model.plan")
    sh([args.loom_run, onnx_path, "--train", "--precision", "bf16",
        "--input", "idx=" + os.path.join(work, "idx.npy"), "--labels",
        os.path.join(work, "labels.npy"), "--batch-size", str(args.batch),
        "--optimizer", "adamw", "--lr", str(args.lr), "--steps", "0",
        "--emit-plan", plan])
    with open(plan, "rb") as source, gzip.open(
            os.path.join(kit, "model.plan.gz"), "wb", compresslevel=1) as out:
        shutil.copyfileobj(source, out, 1 << 24)
    config = {k: getattr(args, k) for k in
              ("batch", "seq", "layers", "heads", "embd", "vocab", "lr",
               "gelu")}
    with open(os.path.join(kit, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    shutil.rmtree(work)
    print("kit in %s: %.1f MB" % (kit, os.path.getsize(
        os.path.join(kit, "model.plan.gz")) / 1e6))


def training_flops_per_token(c):
    d, layers, t, v = c["embd"], c["layers"], c["seq"], c["vocab"]
    forward = layers * (24 * d * d + 4 * t * d) + 2 * d * v
    return 3 * forward


def median_step_ms(path, warmup):
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    timed = [r["step_ms"] for r in records[warmup:]] or [
        r["step_ms"] for r in records]
    return statistics.median(timed), [r["loss"] for r in records]


def torch_steps(c, device, steps, metrics, sdpa=False, after_step=None):
    """PyTorch eager: the same model, batch, optimizer; loom-run's metrics
    format. `sdpa`: its attention core is PyTorch's fused
    scaled_dot_product_attention (flash on a GPU) instead of the model's
    matmul/softmax code, PyTorch at its best without compilation.
    `after_step()` is called after each step (a profiler's step)."""
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(ROOT, "examples", "gpt"))
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from export_gpt import GPT
    torch.manual_seed(0)
    model = GPT(vocab=c["vocab"], block_size=c["seq"], n_layer=c["layers"],
                n_head=c["heads"], n_embd=c["embd"],
                gelu=c.get("gelu", "none")).to(device)
    if sdpa:
        for block in model.modules():
            if hasattr(block, "attend"):
                block.attend = lambda q, k, v, T: \
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=c["lr"])
    generator = torch.Generator().manual_seed(1)
    idx = torch.randint(0, c["vocab"], (c["batch"], c["seq"]),
                        generator=generator).to(device)
    labels = torch.randint(0, c["vocab"], (c["batch"], c["seq"]),
                           generator=generator).to(device)
    dtype = torch.bfloat16
    with open(metrics, "w") as out:
        for step in range(steps):
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            with torch.autocast(device_type=device, dtype=dtype):
                logits = model(idx)
                loss = F.cross_entropy(logits.float().view(-1, c["vocab"]),
                                       labels.view(-1))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            value = loss.item()  # synchronizes, as loom-run reads its loss
            ms = (time.perf_counter() - start) * 1e3
            out.write(json.dumps({"step": step, "loss": value,
                                  "step_ms": ms}) + "\n")
            if after_step:
                after_step()


def torch_profile(c, device, path):
    """PyTorch's profiler over the third step (the first two, and building
    the model, warm up the allocator and cuBLAS unprofiled): the kernels by
    total device time."""
    from torch.profiler import ProfilerActivity, profile, schedule
    metrics = path + ".jsonl"
    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities,
                 schedule=schedule(wait=2, warmup=0, active=1)) as prof:
        torch_steps(c, device, 3, metrics, after_step=prof.step)
    # Newer PyTorch names the device column device_time_total.
    keys = (["device_time_total", "cuda_time_total"] if device == "cuda" else
            ["cpu_time_total"])
    table = None
    for key in keys:
        try:
            table = prof.key_averages().table(sort_by=key, row_limit=40)
            break
        except (AttributeError, KeyError, ValueError):
            continue
    if table is None:
        table = prof.key_averages().table(row_limit=40)
    with open(path, "w") as out:
        out.write(table)
    os.remove(metrics)


def torch_version():
    import torch
    return torch.__version__


def matmul_ceiling_tflops(device):
    import torch
    if device != "cuda":
        return None
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return 2 * 8192 ** 3 * 10 / (time.perf_counter() - start) / 1e12


def run(args):
    kit = os.path.abspath(args.kit_dir)
    with open(os.path.join(kit, "config.json")) as f:
        c = json.load(f)
    work = os.path.join(kit, "run")
    os.makedirs(work, exist_ok=True)
    plan = os.path.join(work, "model.plan")
    with gzip.open(os.path.join(kit, "model.plan.gz"), "rb") as source, open(
            plan, "wb") as out:
        shutil.copyfileobj(source, out, 1 << 24)
    sh([sys.executable, os.path.join(HERE, "fill_weights.py"), plan])
    rng = np.random.default_rng(1)
    samples = c["batch"] * 4
    np.save(os.path.join(work, "idx.npy"),
            rng.integers(0, c["vocab"], (samples, c["seq"]), dtype=np.int64))
    np.save(os.path.join(work, "labels.npy"),
            rng.integers(0, c["vocab"], (samples, c["seq"]), dtype=np.int64))
    def loom_train(flags, name):
        """Trains with loom-run `flags`: (median ms, losses, stderr). A
        failure ends the benchmark for the first run only: the others are
        variants, and PyTorch's figures are still worth having."""
        metrics = os.path.join(work, name + ".jsonl")
        command = [args.loom_run, plan, "--train", "--device", args.device,
                   "--input", "idx=" + os.path.join(work, "idx.npy"),
                   "--labels", os.path.join(work, "labels.npy"),
                   "--batch-size", str(c["batch"]), "--steps",
                   str(args.steps), "--metrics", metrics] + flags
        print("+ " + " ".join(command), flush=True)
        done = subprocess.run(command, stderr=subprocess.PIPE, text=True)
        sys.stderr.write(done.stderr)
        if done.returncode != 0:
            if not flags:
                sys.exit("loom-run failed (exit %d)" % done.returncode)
            print("WARNING: loom-run %s failed (exit %d); no row for it" %
                  (" ".join(flags), done.returncode))
            return None, None, done.stderr
        ms, losses = median_step_ms(metrics, args.warmup)
        return ms, losses, done.stderr

    started = time.perf_counter()
    loom_ms, loom_losses, said = loom_train([], "loom")
    # Where the GEMM epilogues ran: cuBLASLt's, or the own kernel after a
    # plain GEMM (an extra pass over the result).
    epilogues = [line.split("matmul epilogues: ", 1)[1] for line in
                 said.splitlines() if "matmul epilogues: " in line]
    loom_wall = time.perf_counter() - started
    rows = [("Loom (loom-run --device %s)" % args.device, loom_ms,
             loom_losses)]
    tuning = None
    if args.device == "cuda" and not args.no_graphs:
        graph_ms, graph_losses, _ = loom_train(["--cuda-graphs"],
                                               "loom-graphs")
        if graph_ms is not None:
            rows.append(("Loom --cuda-graphs", graph_ms, graph_losses))
        if graph_ms is not None and graph_losses != loom_losses:
            print("WARNING: the --cuda-graphs losses differ from the "
                  "kernel-by-kernel run's: %s vs %s" %
                  (graph_losses, loom_losses))
    if args.device == "cuda" and not args.no_tuning:
        flags = ["--tune-matmuls"] + ([] if args.no_graphs else
                                      ["--cuda-graphs"])
        tuned_ms, tuned_losses, said = loom_train(flags, "loom-tuned")
        if tuned_ms is not None:
            rows.append(("Loom " + " ".join(flags), tuned_ms, tuned_losses))
        tuning = [line.split("matmul tuning: ", 1)[1] for line in
                  said.splitlines() if "matmul tuning: " in line]
    if args.profile:
        with open(args.profile, "w") as out:
            try:
                sh([args.loom_run, plan, "--train", "--device", args.device,
                    "--input", "idx=" + os.path.join(work, "idx.npy"),
                    "--labels", os.path.join(work, "labels.npy"),
                    "--batch-size", str(c["batch"]), "--steps", "2",
                    "--report"], stdout=out)
            except subprocess.CalledProcessError as error:
                print("WARNING: the --report run failed (exit %d)" %
                      error.returncode)
    tokens = c["batch"] * c["seq"]
    flops = training_flops_per_token(c) * tokens
    looms = len(rows)
    # Loom's figures first: a PyTorch side that crashes, hangs or cannot be
    # imported must not take them along (a GPU session is short).
    for name, ms, _ in rows:
        print("%s: %.2f ms per step, %.0f tokens/s (before PyTorch runs)" %
              (name, ms, tokens / (ms * 1e-3)), flush=True)
    ceiling = None
    torch_failed = []
    notes = []
    if not args.no_torch:
        def attempt(what, step):
            try:
                return step()
            except Exception as error:  # noqa: BLE001 (reported; exit 1)
                torch_failed.append(what)
                print("WARNING: PyTorch's %s failed (%s: %s)" %
                      (what, type(error).__name__, error), flush=True)
                return None

        torch_metrics = os.path.join(work, "torch.jsonl")
        attempt("training steps", lambda: torch_steps(
            c, args.device, args.steps, torch_metrics))
        if not torch_failed:
            torch_ms, torch_losses = median_step_ms(torch_metrics,
                                                    args.warmup)
            rows.append(("PyTorch eager (autocast bf16)", torch_ms,
                         torch_losses))
            sdpa_metrics = os.path.join(work, "torch-sdpa.jsonl")
            sdpa_ran = None
            import torch.nn.functional as F
            if not hasattr(F, "scaled_dot_product_attention"):
                notes.append("PyTorch %s has no scaled_dot_product_attention:"
                             " no SDPA row" % torch_version())
            else:
                sdpa_ran = attempt("training steps with SDPA", lambda: (
                    torch_steps(c, args.device, args.steps, sdpa_metrics,
                                sdpa=True) or True))
            if sdpa_ran:
                sdpa_ms, sdpa_losses = median_step_ms(sdpa_metrics,
                                                      args.warmup)
                rows.append(("PyTorch eager + SDPA", sdpa_ms,
                             sdpa_losses))
            if args.profile:
                attempt("profile", lambda: torch_profile(
                    c, args.device, args.profile + ".torch.txt"))
            ceiling = attempt("matmul ceiling",
                              lambda: matmul_ceiling_tflops(args.device))
    print()
    print("GPT: %d layers, d=%d, %d heads, seq %d, vocab %d, batch %d, "
          "GELU %s; bf16 GEMMs, fp32 master weights, AdamW; %d steps, median "
          "of the last %d" % (c["layers"], c["embd"], c["heads"], c["seq"],
                              c["vocab"], c["batch"], c.get("gelu", "none"),
                              args.steps,
                       max(1, args.steps - args.warmup)))
    print("training FLOPs per step: %.3g (%.3g per token)" %
          (flops, training_flops_per_token(c)))
    print("%-32s %10s %12s %8s %10s" % ("", "step ms", "tokens/s", "MFU",
                                        "loss[0]"))
    for name, ms, losses in rows:
        achieved = flops / (ms * 1e-3) / 1e12
        print("%-32s %10.2f %12.0f %7.1f%% %10.4f" %
              (name, ms, tokens / (ms * 1e-3),
               100 * achieved / args.peak_tflops, losses[0]))
    for note in notes:
        print(note)
    for reference, reference_ms, _ in rows[looms:]:
        for name, ms, _ in rows[:looms]:
            print("%s / %s throughput: %.2f (> 1: Loom faster)" %
                  (name, reference, reference_ms / ms))
    print("MFU against %.0f TFLOP/s (dense bf16 peak)%s" %
          (args.peak_tflops, "" if ceiling is None else
           "; one 8192^3 bf16 matmul in PyTorch reaches %.0f TFLOP/s here" %
           ceiling))
    if epilogues:
        print("matmul epilogues: %s" % epilogues[-1])
    if tuning:
        print("--tune-matmuls: %s" % tuning[-1])
    print("loom-run wall time (load, compile elementwise kernels, %d steps):"
          " %.1f s" % (args.steps, loom_wall))
    return 1 if torch_failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["make", "run"])
    parser.add_argument("kit_dir")
    parser.add_argument("--loom-run", required=True)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--embd", type=int, default=768)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--gelu", choices=["tanh", "none"], default="tanh",
                        help="make only (run reads the kit's): the MLP's "
                        "GELU, tanh (GPT-2's; cuBLASLt's epilogue computes "
                        "it) or none (the exact erf form)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--no-graphs", action="store_true")
    parser.add_argument("--no-tuning", action="store_true")
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--profile", metavar="FILE")
    args = parser.parse_args()
    if args.command == "make":
        make(args)
    else:
        sys.exit(run(args))


if __name__ == "__main__":
    main()
