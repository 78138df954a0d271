#!/usr/bin/env python3
"""ZeRO's mixed-precision memory table, checked on a model it holds for.

    zero_mixed_memory.py export OUT_DIR
    zero_mixed_memory.py check MODEL.onnx N STAGE REPORT.json

`export` writes OUT_DIR/model.onnx: an MLP whose parameters only matrix
products read (three bias-free Linear layers, 32 -> 64 -> 64 -> 8, batch
4), so that under `--precision bf16` every parameter has a bf16 copy and
ZeRO's accounting (arXiv 1910.02054, section 3.1 and Table 1: fp16
parameters 2 Psi, fp16 gradients 2 Psi, fp32 master, momentum and variance
12 Psi) applies exactly. Also OUT_DIR/input.npy and labels.npy.

`check` compares rank figures of a `loom-run --train --precision bf16
--grad-precision bf16 --dp N --zero STAGE --report-json` file with the
formulas per rank: 2 Psi + 2 Psi + 12 Psi (stage 0), 2 Psi + 2 Psi +
12 Psi / N (1), 2 Psi + 14 Psi / N (2), 16 Psi / N (3), in bytes, Psi
counted from the model's initializers; the optimizer state also holds the
8-byte step counter. Prints one line per field and exits 1 on a mismatch.
"""
import json
import os
import sys

import numpy as np


def export(out):
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64, bias=False), torch.nn.ReLU(),
        torch.nn.Linear(64, 64, bias=False), torch.nn.ReLU(),
        torch.nn.Linear(64, 8, bias=False))
    os.makedirs(out, exist_ok=True)
    torch.onnx.export(model, (torch.randn(4, 32),),
                      os.path.join(out, "model.onnx"), opset_version=17,
                      input_names=["x"], output_names=["logits"],
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)
    rng = np.random.default_rng(0)
    np.save(os.path.join(out, "input.npy"),
            rng.normal(size=(16, 32)).astype(np.float32))
    np.save(os.path.join(out, "labels.npy"), rng.integers(0, 8, size=16))


def check(model_path, n, stage, report_path):
    import onnx
    model = onnx.load(model_path)
    psi = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
    params = 2 * psi if stage < 3 else 2 * psi // n
    grads = 2 * psi if stage < 2 else 2 * psi // n
    optimizer = 12 * psi if stage == 0 else 12 * psi // n
    expected = {"param_bytes": params, "grad_bytes": grads,
                "optimizer_bytes": optimizer + 8}
    with open(report_path) as f:
        ranks = json.load(f)["ranks"]
    ok = len(ranks) == n
    for field, value in expected.items():
        got = sorted({r[field] for r in ranks})
        good = got == [value]
        ok &= good
        print("N=%d stage %d %s: %s (formula %d)%s" % (
            n, stage, field, ", ".join(map(str, got)), value,
            "" if good else "  MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "export":
        export(sys.argv[2])
        sys.exit(0)
    sys.exit(check(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                   sys.argv[5]))
