#!/usr/bin/env python3
"""The model zoo: each family exported at each opset, imported by Loom, its
logits compared with PyTorch's, and a short AdamW run compared step by step.

    zoo.py OUT_DIR --loom-run BIN [--families llama,neox,opt,bert,vit]
           [--opsets 14,17] [--steps 10] [--source repo|hf] [--rtol 1e-4]
           [--onnx-python PY]
    zoo.py OUT_DIR --loom-run BIN --from-dir DIR

--source repo (default) builds examples/zoo/models.py's models; --source hf
builds the same families from Hugging Face `transformers` (random weights,
no downloads; needs transformers importable). Each model is exported with
torch.onnx.export(training=TRAINING, do_constant_folding=False) at every
opset, then:

  imported  `loom-run` runs the model on the example inputs;
  logits    their largest difference from PyTorch's, relative to PyTorch's
            largest logit, is at most --rtol;
  trains    `loom-run --train` runs STEPS AdamW steps (lr 1e-3, weight decay
            0.01, eps 1e-5: biases that softmax makes gradient-free, such
            as attention key biases, get gradients of rounding noise, which
            AdamW with eps 1e-8 turns into lr-sized steps of random sign in
            every implementation) over a data set of 3 batches, and every
            step's loss is within --rtol of torch.optim.AdamW's on the same
            data. Embedding rows PyTorch's padding_idx freezes are passed as
            --padding-idx, as a user would (Loom warns about them).

Opsets newer than 17 (the newest torch 1.13 exports) are made as the
newer exporters' would be: exported at 17, then upgraded by ONNX's own
version converter, run with --onnx-python PY, an interpreter with onnx
1.15 or newer (scripts/bootstrap.sh makes one in build/py-onnx).

--from-dir DIR checks the models examples/zoo/export_current.py wrote with
a current PyTorch's default exporter (torch.export-based, opset 18+) on a
machine that has one, against the references it saved there.

Prints one table row per (family, opset) and exits 1 when any check fails.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402


class Logits(torch.nn.Module):
    """A Hugging Face model's logits as the only output."""

    def __init__(self, model):
        super().__init__()
        self.m = model

    def forward(self, *args):
        return self.m(*args).logits


def build_hf(family):
    import transformers as T
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    batch, seq, vocab = 2, 16, 64
    common = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                  num_attention_heads=4)
    tokens = torch.randint(0, vocab, (batch, seq), generator=gen)
    padding = {}
    if family == "llama":
        config = T.LlamaConfig(vocab_size=vocab, num_key_value_heads=2,
                               max_position_embeddings=seq, **common)
        model = T.LlamaForCausalLM(config)
        if config.pad_token_id is not None:
            padding["m.model.embed_tokens.weight"] = config.pad_token_id
    elif family == "neox":
        model = T.GPTNeoXForCausalLM(T.GPTNeoXConfig(
            vocab_size=vocab, rotary_pct=0.5, max_position_embeddings=seq,
            **common))
    elif family == "opt":
        config = T.OPTConfig(vocab_size=vocab, hidden_size=32, ffn_dim=48,
                             num_hidden_layers=2, num_attention_heads=4,
                             word_embed_proj_dim=32, dropout=0.0,
                             max_position_embeddings=seq)
        model = T.OPTForCausalLM(config)
        padding["m.model.decoder.embed_tokens.weight"] = config.pad_token_id
    elif family == "bert":
        config = T.BertConfig(vocab_size=vocab, max_position_embeddings=seq,
                              hidden_dropout_prob=0.0,
                              attention_probs_dropout_prob=0.0, **common)
        model = T.BertForMaskedLM(config)
        padding["m.bert.embeddings.word_embeddings.weight"] = \
            config.pad_token_id
    elif family == "vit":
        model = T.ViTForImageClassification(T.ViTConfig(
            image_size=32, patch_size=8, num_labels=10,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            **common))
        pixels = torch.rand(batch, 3, 32, 32, generator=gen)
        return Logits(model), {"pixel_values": pixels}, (batch,), padding, 10
    else:
        raise ValueError(family)
    model.config.use_cache = False
    return Logits(model), {"input_ids": tokens}, (batch, seq), padding, vocab


# Upgrades model argv[1] in place to opset argv[2] with ONNX's converter.
UPGRADE = """
import sys, onnx
from onnx import version_converter
model = version_converter.convert_version(onnx.load(sys.argv[1]),
                                          int(sys.argv[2]))
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
"""


def data_set(inputs, labels_shape, classes, batches, seed):
    """`batches` batches of random samples like `inputs`, and labels."""
    gen = torch.Generator().manual_seed(seed)
    data = {}
    for name, example in inputs.items():
        shape = (batches * example.shape[0],) + tuple(example.shape[1:])
        if name == "attention_mask":
            data[name] = torch.ones(shape, dtype=example.dtype)
        elif example.dtype.is_floating_point:
            data[name] = torch.rand(shape, generator=gen)
        else:
            high = int(example.max()) + 1
            data[name] = torch.randint(0, max(high, 2), shape, generator=gen)
    shape = (batches * labels_shape[0],) + tuple(labels_shape[1:])
    labels = torch.randint(0, classes, shape, generator=gen)
    return data, labels


def train_torch(model, names, data, labels, batch, steps):
    """PyTorch's per-step losses: torch.optim.AdamW as loom-run is told to
    run it (lr 1e-3, eps 1e-5, weight decay 0.01), step i on the samples
    (i * batch + j) mod count, the mean cross-entropy of the logits."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, eps=1e-5,
                                  weight_decay=0.01)
    samples, losses = labels.shape[0], []
    for step in range(steps):
        rows = [(step * batch + j) % samples for j in range(batch)]
        logits = model(*[data[name][rows] for name in names])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               labels[rows].reshape(-1))
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses


def run(command):
    result = subprocess.run(command, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    return result.returncode, result.stdout + result.stderr


def check(family, opset, args, out):
    """(imported, logits error, training error, note)."""
    build = build_hf if args.source == "hf" else models.build
    model, inputs, labels_shape, padding, classes = build(family)
    model.train()  # dropout is 0; training mode as exported
    names = list(inputs)
    path = os.path.join(out, "model.onnx")
    torch.onnx.export(model, tuple(inputs.values()), path,
                      opset_version=min(opset, 17),
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=names,
                      output_names=["logits"])
    if opset > 17:
        if not args.onnx_python:
            return False, None, None, "needs --onnx-python for opset %d" % opset
        code, said = run([args.onnx_python, "-c", UPGRADE, path, str(opset)])
        if code != 0:
            return False, None, None, "version converter failed: " + \
                said.strip().splitlines()[-1]
    with torch.no_grad():
        reference = model(*inputs.values()).numpy()
    files = []
    for name, tensor in inputs.items():
        np.save(os.path.join(out, name + ".npy"), tensor.numpy())
        files += ["--input", name + "=" + os.path.join(out, name + ".npy")]
    code, said = run([args.loom_run, path, "--output-dir",
                      os.path.join(out, "out")] + files)
    if code != 0:
        return False, None, None, said.strip().splitlines()[-1]
    logits = np.load(os.path.join(out, "out", "logits.npy"))
    logits_error = float(np.abs(logits - reference).max() /
                         np.abs(reference).max())

    batch = labels_shape[0]
    data, labels = data_set(inputs, labels_shape, classes, 3, seed=7)
    files = []
    for name, tensor in data.items():
        np.save(os.path.join(out, "data." + name + ".npy"), tensor.numpy())
        files += ["--input",
                  name + "=" + os.path.join(out, "data." + name + ".npy")]
    np.save(os.path.join(out, "labels.npy"), labels.numpy())
    padding_flags = []
    for name, row in padding.items():
        padding_flags += ["--padding-idx", "^%s$=%d" % (
            name.replace(".", r"\."), row)]
    metrics = os.path.join(out, "metrics.jsonl")
    code, said = run([args.loom_run, path, "--train", "--labels",
                      os.path.join(out, "labels.npy"), "--batch-size",
                      str(batch), "--steps", str(args.steps), "--optimizer",
                      "adamw", "--lr", "1e-3", "--eps", "1e-5",
                      "--weight-decay", "0.01", "--metrics", metrics] +
                     files + padding_flags)
    if code != 0:
        return True, logits_error, None, said.strip().splitlines()[-1]
    loom_losses = [json.loads(line)["loss"] for line in open(metrics)]

    torch_losses = train_torch(model, names, data, labels, batch, args.steps)
    train_error = max(abs(a - b) / abs(b)
                      for a, b in zip(loom_losses, torch_losses))
    return True, logits_error, train_error, ""


def check_exported(directory, args):
    """check() for a model export_current.py wrote (model, references and
    PyTorch's losses in `directory`)."""
    with open(os.path.join(directory, "meta.json")) as f:
        meta = json.load(f)
    path = os.path.join(directory, "model.onnx")
    files = []
    for name in meta["inputs"]:
        files += ["--input", name + "=" + os.path.join(directory,
                                                       name + ".npy")]
    out = os.path.join(args.out_dir, os.path.basename(directory))
    os.makedirs(out, exist_ok=True)
    code, said = run([args.loom_run, path, "--output-dir",
                      os.path.join(out, "out")] + files)
    if code != 0:
        return meta, False, None, None, said.strip().splitlines()[-1]
    reference = np.load(os.path.join(directory, "logits.npy"))
    logits = np.load(os.path.join(out, "out", "logits.npy"))
    logits_error = float(np.abs(logits - reference).max() /
                         np.abs(reference).max())
    files = []
    for name in meta["inputs"]:
        files += ["--input", name + "=" + os.path.join(
            directory, "data." + name + ".npy")]
    for name, row in meta["padding"].items():
        files += ["--padding-idx", "^%s$=%d" % (name.replace(".", r"\."),
                                                row)]
    with open(os.path.join(directory, "losses.json")) as f:
        torch_losses = json.load(f)
    metrics = os.path.join(out, "metrics.jsonl")
    code, said = run([args.loom_run, path, "--train", "--labels",
                      os.path.join(directory, "labels.npy"), "--batch-size",
                      str(meta["batch"]), "--steps", str(len(torch_losses)),
                      "--optimizer", "adamw", "--lr", "1e-3", "--eps",
                      "1e-5", "--weight-decay", "0.01", "--metrics",
                      metrics] + files)
    if code != 0:
        return meta, True, logits_error, None, said.strip().splitlines()[-1]
    loom_losses = [json.loads(line)["loss"] for line in open(metrics)]
    train_error = max(abs(a - b) / abs(b)
                      for a, b in zip(loom_losses, torch_losses))
    return meta, True, logits_error, train_error, ""


def main_from_dir(args):
    print("%-12s %-6s %-9s %-14s %-14s %s" % (
        "model", "opset", "imported", "logits", "trains", ""))
    failures = total = 0
    for entry in sorted(os.listdir(args.from_dir)):
        directory = os.path.join(args.from_dir, entry)
        if not os.path.exists(os.path.join(directory, "meta.json")):
            continue
        total += 1
        meta, imported, logits, train, note = check_exported(directory, args)
        ok_logits = logits is not None and logits <= args.rtol
        ok_train = train is not None and train <= args.rtol
        failures += not (imported and ok_logits and ok_train)
        print("%-12s %-6d %-9s %-14s %-14s %s" % (
            entry, meta["opset"], "yes" if imported else "NO",
            "-" if logits is None else "%s %.1e" % (
                "match" if ok_logits else "MISMATCH", logits),
            "-" if train is None else "%s %.1e" % (
                "match" if ok_train else "MISMATCH", train), note),
            flush=True)
    print("%s: %d of %d models fail" % ("FAILED" if failures else "all pass",
                                        failures, total))
    return 1 if failures or not total else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--loom-run", required=True)
    parser.add_argument("--families", default=",".join(models.FAMILIES))
    parser.add_argument("--opsets", default="14,17")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--source", choices=["repo", "hf"], default="repo")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--onnx-python",
                        help="an interpreter with onnx >= 1.15, for opsets "
                        "newer than 17")
    parser.add_argument("--from-dir",
                        help="check the models export_current.py wrote "
                        "there (a current PyTorch's exporter) instead")
    args = parser.parse_args()
    if args.from_dir:
        return main_from_dir(args)
    print("%-7s %-6s %-9s %-14s %-14s %s" % (
        "family", "opset", "imported", "logits", "trains", ""))
    failures = 0
    for family in args.families.split(","):
        for opset in [int(o) for o in args.opsets.split(",")]:
            out = os.path.join(args.out_dir, "%s-o%d" % (family, opset))
            os.makedirs(out, exist_ok=True)
            imported, logits, train, note = check(family, opset, args, out)
            ok_logits = logits is not None and logits <= args.rtol
            ok_train = train is not None and train <= args.rtol
            failures += not (imported and ok_logits and ok_train)
            print("%-7s %-6d %-9s %-14s %-14s %s" % (
                family, opset, "yes" if imported else "NO",
                "-" if logits is None else "%s %.1e" % (
                    "match" if ok_logits else "MISMATCH", logits),
                "-" if train is None else "%s %.1e" % (
                    "match" if ok_train else "MISMATCH", train), note),
                flush=True)
    print("%s: %d of %d (family, opset) pairs fail" % (
        "FAILED" if failures else "all pass", failures,
        len(args.families.split(",")) * len(args.opsets.split(","))))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
