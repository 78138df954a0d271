#!/usr/bin/env python3
"""Export a small nanoGPT-style decoder to ONNX for the Loom importer.

Run with the Debian interpreter, which has torch 1.13 / onnx 1.12 / numpy:

    /usr/bin/python3 examples/gpt/export_gpt.py --opset 17 --out /tmp/gpt.onnx
    /usr/bin/python3 examples/gpt/export_gpt.py --opset 14 --out /tmp/gpt_loss.onnx \
        --with-loss --save-reference /tmp/gpt_ref

Graph interface:
  * inputs:  idx      int64 [batch, seq]
             targets  int64 [batch, seq]          (only with --with-loss)
  * outputs: logits   float32 [batch, seq, vocab]
             loss     float32 []                  (only with --with-loss)
With --with-loss the outputs are ('logits', 'loss'), in that order.

The model avoids constructs our importer does not handle (torch.arange -> Range,
torch.tril -> Trilu, ...); the exported graph is checked against an allowlist of
op types and the script exits non-zero if anything else shows up.

--save-reference DIR runs the PyTorch model (eval mode) on a fixed seeded input
of shape [2, block_size] and writes input.npy / logits.npy (plus targets.npy /
loss.npy with --with-loss) for numeric comparison.
"""

import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from onnx_export import export  # noqa: E402


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.0):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.head_dim = n_embd // n_head  # Python int: no traced Div/Cast in the graph
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)  # fused q, k, v projection
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        # Lower-triangular causal mask, built here in Python (no Trilu in the
        # graph); it becomes a constant initializer that is sliced per call.
        mask = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("bias", mask.view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        hd = self.head_dim
        q, k, v = self.c_attn(x).split(C, dim=2)                    # Split
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)            # (B, nh, T, hd)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        y = self.attend(q, k, v, T)                                  # (B, nh, T, hd)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))

    def attend(self, q, k, v, T):
        """Causal softmax(q k^T / sqrt(hd)) v, the pattern loom-fuse-attention
        fuses (a method so that references can swap in Loom's numerics)."""
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))  # Equal + Where
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        return att @ v


class MLP(nn.Module):
    def __init__(self, n_embd, dropout=0.0, gelu="none"):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        # "none": the exact (erf) form; "tanh": GPT-2's own approximation
        # (the form cuBLASLt's GELU epilogues compute).
        self.gelu = nn.GELU(approximate=gelu)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.0, gelu="none"):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, dropout)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd, dropout, gelu)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab, block_size, n_layer, n_head, n_embd, dropout=0.0,
                 gelu="none"):
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)       # -> Gather
        self.wpe = nn.Embedding(block_size, n_embd)  # used via weight[:T] -> Slice
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(
            [Block(n_embd, n_head, block_size, dropout, gelu)
             for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        # LayerNorm params default to ones/zeros; in eval mode the exporter
        # de-duplicates equal-valued initializers, which would tie every LN's
        # weight (and bias) to one initializer via Identity nodes. Perturb them
        # so each LN keeps its own parameters (and the affine part is exercised).
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.LayerNorm):
                    m.weight.add_(0.1 * torch.randn_like(m.weight))
                    m.bias.add_(0.1 * torch.randn_like(m.bias))

    def forward(self, idx, targets=None):
        T = idx.size(1)
        # Positional embeddings without torch.arange (Range is unsupported):
        # slice the first T rows of the table and broadcast over the batch.
        pos = self.wpe.weight[:T]
        x = self.drop(self.wte(idx) + pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        # Mean cross-entropy over all positions -> SoftmaxCrossEntropyLoss.
        V = logits.size(-1)
        loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
        return logits, loss


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--opset", type=int, required=True, choices=range(13, 18),
                   metavar="{13..17}")
    p.add_argument("--out", required=True, help="output .onnx file")
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--embd", type=int, default=32)
    p.add_argument("--with-loss", action="store_true",
                   help="add a 'targets' input and a scalar 'loss' output")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-reference", metavar="DIR",
                   help="save input/targets/logits/loss .npy files from PyTorch")
    args = p.parse_args()

    torch.manual_seed(args.seed)
    model = GPT(args.vocab, args.block_size, args.layers, args.heads, args.embd)
    model.eval()

    # Fixed example input (batch 2, seq = block size); also used for the reference.
    gen = torch.Generator().manual_seed(args.seed + 1)
    shape = (2, args.block_size)
    idx = torch.randint(0, args.vocab, shape, dtype=torch.int64, generator=gen)
    targets = torch.randint(0, args.vocab, shape, dtype=torch.int64, generator=gen)

    if args.with_loss:
        example = (idx, targets)
        input_names, output_names = ["idx", "targets"], ["logits", "loss"]
        dynamic_axes = {"idx": {0: "batch", 1: "seq"},
                        "targets": {0: "batch", 1: "seq"},
                        "logits": {0: "batch", 1: "seq"}}
    else:
        example = (idx,)
        input_names, output_names = ["idx"], ["logits"]
        dynamic_axes = {"idx": {0: "batch", 1: "seq"},
                        "logits": {0: "batch", 1: "seq"}}

    return export(model, example, input_names, output_names, dynamic_axes,
                  args)


if __name__ == "__main__":
    sys.exit(main())
