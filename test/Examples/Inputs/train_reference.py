#!/usr/bin/env python3
"""Exports an example model for training and trains it with PyTorch as a reference.

    train_reference.py {gpt,gpt-gelu,mlp,mlp-gelu} OUT_DIR --optimizer sgd|adamw [--lr X]
        [--momentum X] [--dampening X] [--nesterov] [--weight-decay X]
        [--betas B1,B2] [--eps X] [--clip-grad-norm X] [--steps N]
        [--batch-size B] [--samples S] [--grad-accum K] [--precision bf16]

Builds the model like export_with_gradients.py (torch.manual_seed(0), the same
small configurations) and writes
  OUT_DIR/model.onnx       training-mode export (`training=TRAINING,
                           do_constant_folding=False`, opset 17): every
                           parameter is an initializer named like in
                           model.named_parameters(); the batch dimension is
                           static and equals the microbatch size B/K
  OUT_DIR/input.npy        the whole data set of S random samples (GPT:
  OUT_DIR/labels.npy       int64 [S, 16] token ids and int64 [S, 16] target
                           ids; MLP: float32 [S, 32] features and int64 [S]
                           classes)
Then trains the same initial weights with torch.optim.SGD or torch.optim.AdamW
for N steps: step i uses rows (i*B + j) % S, j in [0, B), and the mean
F.cross_entropy over the flattened logits; with --grad-accum K the batch is K
microbatches of B/K rows whose losses are divided by K before backward().
--clip-grad-norm applies torch.nn.utils.clip_grad_norm_ before each update.
--precision bf16 trains with Loom's mixed precision (bf16_matmul.py): matrix
products in bf16, everything else f32. --dropout P (GPT only) exports the
model with dropout P in training mode; PyTorch's masks are not Loom's, so
there is no PyTorch run then (no OUT_DIR/ref): Loom's layouts are compared
with Loom's one-rank run instead.
Writes
  OUT_DIR/ref/losses.json  per-step losses (before that step's update; with K
                           microbatches, the mean of their losses)
  OUT_DIR/ref/NAME.npy     every parameter after the last step
and prints the matching `loom-run --train` command line on stdout.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import torch
import torch.nn.functional as F

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                    "..", "examples")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # mlp-gelu: the MLP with the tanh GELU as its first activation;
    # gpt-gelu: the GPT with the tanh GELU (GPT-2's) in its MLPs.
    parser.add_argument("model", choices=["gpt", "gpt-gelu", "mlp", "mlp-gelu"])
    parser.add_argument("out_dir")
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], required=True)
    parser.add_argument("--lr", type=float,
                        help="learning rate (adamw default 1e-3; sgd: required)")
    parser.add_argument("--momentum", type=float, default=0.0)
    parser.add_argument("--dampening", type=float, default=0.0)
    parser.add_argument("--nesterov", action="store_true")
    parser.add_argument("--weight-decay", type=float,
                        help="default: sgd 0, adamw 1e-2")
    parser.add_argument("--betas", default="0.9,0.999")
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--clip-grad-norm", type=float)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--samples", type=int, default=10,
                        help="data set size; not a multiple of the batch size "
                             "so that the steps wrap around it unevenly")
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--vocab", type=int, default=64,
                        help="the GPT's vocabulary (61: not a multiple of "
                        "8, so Loom pads its classes)")
    parser.add_argument("--loss", choices=["cross_entropy", "mse"],
                        default="cross_entropy",
                        help="mse: float labels shaped like the output "
                             "(torch.nn.functional.mse_loss)")
    parser.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                        help="bf16: matrix products as loom-run --precision "
                             "bf16 computes them (bf16_matmul.py)")
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="GPT only: export with this dropout and skip "
                        "the PyTorch run")
    parser.add_argument("--unfused-attention", action="store_true",
                        help="with --precision bf16: the GPT's attention as "
                             "loom-run --unfused-attention computes it (two "
                             "bf16 GEMMs and an f32 softmax), not as its "
                             "fused kernel")
    args = parser.parse_args()
    if args.lr is None:
        if args.optimizer == "sgd":
            parser.error("--lr is required with --optimizer sgd")
        args.lr = 1e-3
    if args.weight_decay is None:
        args.weight_decay = 0.0 if args.optimizer == "sgd" else 1e-2
    args.betas = tuple(float(b) for b in args.betas.split(","))
    if len(args.betas) != 2:
        parser.error("--betas takes two comma-separated numbers")
    if args.batch_size % args.grad_accum:
        parser.error("--batch-size must be a multiple of --grad-accum")
    if args.dropout and not args.model.startswith("gpt"):
        parser.error("--dropout is for the GPT")
    return args


def build_model(which, vocab=64, dropout=0.0):
    """The model of export_with_gradients.py and its ONNX input name."""
    if which in ("gpt", "gpt-gelu"):
        sys.path.insert(0, os.path.join(ROOT, "gpt"))
        import export_gpt
        gelu = "tanh" if which == "gpt-gelu" else "none"
        return export_gpt.GPT(vocab=vocab, block_size=16, n_layer=2, n_head=2,
                              n_embd=32, dropout=dropout, gelu=gelu), "idx"
    sys.path.insert(0, os.path.join(ROOT, "mlp"))
    import export_mlp
    if which == "mlp-gelu":
        return export_mlp.MLP(activation="gelu_tanh"), "x"
    return export_mlp.MLP(), "x"


def make_dataset(which, samples, loss="cross_entropy", vocab=64):
    """Random (inputs, labels) with `samples` rows, from torch's global RNG."""
    if which in ("gpt", "gpt-gelu"):
        inputs = torch.randint(0, vocab, (samples, 16))
        if loss == "mse":
            return inputs, torch.randn(samples, 16, vocab)
        return inputs, torch.randint(0, vocab, (samples, 16))
    import export_mlp
    inputs = torch.randn(samples, export_mlp.IN_FEATURES)
    if loss == "mse":
        return inputs, torch.randn(samples, export_mlp.CLASSES)
    return inputs, torch.randint(0, export_mlp.CLASSES, (samples,))


def export(model, example, input_name, path):
    model.train()
    torch.onnx.export(model, (example,), path, opset_version=17,
                      input_names=[input_name], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


def check_initializers(model, path):
    """Every parameter must be an initializer of the same name and value."""
    initializers = {t.name: numpy_helper.to_array(t)
                    for t in onnx.load(path).graph.initializer}
    for name, value in model.named_parameters():
        if name not in initializers:
            sys.exit(f"error: parameter {name} is not an initializer of {path}"
                     f" (initializers: {', '.join(sorted(initializers))})")
        if not np.array_equal(initializers[name], value.detach().numpy()):
            sys.exit(f"error: initializer {name} of {path} differs from the "
                     "PyTorch parameter")


def make_optimizer(model, args):
    if args.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=args.lr,
                               momentum=args.momentum,
                               dampening=args.dampening,
                               nesterov=args.nesterov,
                               weight_decay=args.weight_decay)
    return torch.optim.AdamW(model.parameters(), lr=args.lr, betas=args.betas,
                             eps=args.eps, weight_decay=args.weight_decay)


def batch_rows(step, batch, samples):
    return [(step * batch + j) % samples for j in range(batch)]


LOSS = "cross_entropy"


def mean_loss(model, inputs, labels):
    logits = model(inputs)
    if LOSS == "mse":
        return F.mse_loss(logits, labels)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                           labels.reshape(-1))


def train_step(model, optimizer, inputs, labels, args):
    """One update on a batch; returns the mean of the microbatch losses."""
    optimizer.zero_grad()
    total = 0.0
    for micro_in, micro_labels in zip(inputs.chunk(args.grad_accum),
                                      labels.chunk(args.grad_accum)):
        loss = mean_loss(model, micro_in, micro_labels)
        (loss / args.grad_accum).backward()
        total += loss.item()
    if args.clip_grad_norm is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
    optimizer.step()
    return total / args.grad_accum


def train(model, inputs, labels, args):
    """Returns the per-step losses; updates `model` in place."""
    model.train()
    optimizer = make_optimizer(model, args)
    losses = []
    for step in range(args.steps):
        rows = batch_rows(step, args.batch_size, len(inputs))
        losses.append(train_step(model, optimizer, inputs[rows], labels[rows],
                                 args))
    return losses


def loom_flags(args, input_name):
    """The `loom-run --train` command line with the same settings."""
    out = args.out_dir
    flags = [f"loom-run {out}/model.onnx --train",
             f"--input {input_name}={out}/input.npy",
             f"--labels {out}/labels.npy", f"--loss {args.loss}",
             f"--batch-size {args.batch_size}", f"--steps {args.steps}",
             f"--optimizer {args.optimizer}", f"--lr {args.lr:g}",
             f"--weight-decay {args.weight_decay:g}"]
    if args.optimizer == "sgd":
        flags += [f"--momentum {args.momentum:g}",
                  f"--dampening {args.dampening:g}"]
        if args.nesterov:
            flags.append("--nesterov")
    else:
        flags += [f"--betas {args.betas[0]:g},{args.betas[1]:g}",
                  f"--eps {args.eps:g}"]
    if args.clip_grad_norm is not None:
        flags.append(f"--clip-grad-norm {args.clip_grad_norm:g}")
    if args.grad_accum != 1:
        flags.append(f"--grad-accum {args.grad_accum}")
    if args.precision != "f32":
        flags.append(f"--precision {args.precision}")
    if args.unfused_attention:
        flags.append("--unfused-attention")
    flags += [f"--metrics {out}/metrics.jsonl", f"--save {out}/trained.onnx"]
    return " ".join(flags)


def main():
    args = parse_args()
    ref_dir = os.path.join(args.out_dir, "ref")
    os.makedirs(ref_dir, exist_ok=True)
    torch.manual_seed(0)
    model, input_name = build_model(args.model, args.vocab, args.dropout)
    global LOSS
    LOSS = args.loss
    inputs, labels = make_dataset(args.model, args.samples, args.loss,
                                  args.vocab)
    model_path = os.path.join(args.out_dir, "model.onnx")
    export(model, inputs[:args.batch_size // args.grad_accum], input_name,
           model_path)
    check_initializers(model, model_path)
    np.save(os.path.join(args.out_dir, "input.npy"), inputs.numpy())
    np.save(os.path.join(args.out_dir, "labels.npy"), labels.numpy())
    if args.dropout:
        os.rmdir(ref_dir)
        print(loom_flags(args, input_name))
        return 0

    if args.precision == "bf16":  # after the export, which stays f32
        import bf16_matmul
        bf16_matmul.use_bf16_matmuls()
        bf16_matmul.use_loom_layer_norm()
        if args.model == "mlp-gelu":
            # Its first layer's GELU is read only by the next GEMM.
            first, gelu = model.net[0], model.net[1]
            first.forward = lambda x: bf16_matmul.BF16GeluLinear.apply(
                x, first.weight, first.bias)
            gelu.forward = lambda x: x  # applied by BF16GeluLinear
            bf16_matmul.use_linear_into_gelu_grad(model.net[2])
        if args.model in ("gpt", "gpt-gelu"):
            import export_gpt  # on the path since build_model
            for module in model.modules():
                if isinstance(module, export_gpt.CausalSelfAttention):
                    bf16_matmul.use_narrowed_bias(module.c_attn)
                if isinstance(module, (export_gpt.CausalSelfAttention,
                                       export_gpt.MLP)):
                    bf16_matmul.use_residual_linear(module.c_proj)
                if (isinstance(module, export_gpt.MLP) and
                        module.gelu.approximate == "tanh"):
                    bf16_matmul.use_gelu_linear(module)
            if not args.unfused_attention:
                bf16_matmul.use_fused_attention(
                    export_gpt.CausalSelfAttention)
    losses = train(model, inputs, labels, args)
    with open(os.path.join(ref_dir, "losses.json"), "w") as f:
        json.dump(losses, f, indent=1)
    for name, value in model.named_parameters():
        np.save(os.path.join(ref_dir, f"{name}.npy"), value.detach().numpy())
    print(loom_flags(args, input_name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
