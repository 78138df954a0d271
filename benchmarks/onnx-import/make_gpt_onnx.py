#!/usr/bin/env python3
"""Generate a GPT-2-shaped decoder ONNX model with weights in ONNX external data.

The graph mirrors what torch.onnx.export writes for nanoGPT, but it is built
directly with onnx.helper, so generation is fast and memory-light: weights are
streamed tensor by tensor into a single `<out>.data` file (64-byte aligned
offsets) and never held in memory together.

Defaults are GPT-2 XL (48 layers, 1600 wide, 25 heads, ~1.6B parameters with an
untied lm_head, ~6.5 GB of float32 weights).  Tiny configs for tests:

    make_gpt_onnx.py --out /tmp/t/gpt.onnx --layers 2 --embd 64 --heads 4 \
        --vocab 128 --seq 16

Needs only onnx and numpy (e.g. /usr/bin/python3 on Debian).
"""

import argparse
import math
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ALIGN = 64            # byte alignment of every tensor in the .data file
BLOCK = 1 << 20       # elements in the random pattern block that is tiled


class ExternalWriter:
    """Streams weight tensors into one external data file."""

    def __init__(self, data_path, np_dtype, seed=0):
        self.f = open(data_path, "wb")
        self.location = os.path.basename(data_path)   # relative to the model
        self.np_dtype = np.dtype(np_dtype)
        self.onnx_dtype = onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[self.np_dtype]
        rng = np.random.default_rng(seed)
        block = (rng.standard_normal(BLOCK) * 0.02).astype(self.np_dtype)
        self.tile = np.concatenate([block, block])    # lets any start offset read BLOCK contiguous elems
        self.offset = 0
        self.count = 0      # number of tensors written
        self.numel = 0      # total parameters written

    def tensor(self, name, shape, fill="normal"):
        """Write one tensor ('normal' pattern, or 'ones'/'zeros') and return
        its TensorProto pointing at the external data."""
        pad = -self.offset % ALIGN
        if pad:
            self.f.write(b"\0" * pad)
            self.offset += pad
        n = int(np.prod(shape))
        if fill == "normal":
            # Each tensor starts at a different point of the pattern.
            start = (self.count * 7919) % BLOCK
            src = self.tile[start:start + BLOCK]
        else:
            src = np.full(min(n, BLOCK), 1 if fill == "ones" else 0, self.np_dtype)
        left = n
        while left:
            k = min(left, len(src))
            self.f.write(memoryview(src[:k]))
            left -= k
        length = n * self.np_dtype.itemsize

        t = TensorProto(name=name, dims=list(shape), data_type=self.onnx_dtype)
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
        self.f.close()


class GraphBuilder:
    """Small helper that names values and collects nodes/initializers."""

    def __init__(self, writer, args):
        self.w = writer
        self.args = args
        self.nodes = []
        self.inits = []
        self.consts = {}
        self.uid = 0

    def op(self, op_type, inputs, name_hint=None, **attrs):
        self.uid += 1
        out = f"{name_hint or op_type.lower()}_{self.uid}"
        self.nodes.append(helper.make_node(op_type, inputs, [out],
                                           name=f"{op_type}_{self.uid}", **attrs))
        return out

    def weight(self, name, shape, fill="normal"):
        self.inits.append(self.w.tensor(name, shape, fill))
        return name

    def const(self, name, array):
        """Shared small inline initializer (raw_data)."""
        if name not in self.consts:
            self.inits.append(numpy_helper.from_array(np.asarray(array), name))
            self.consts[name] = name
        return name

    def scalar(self, name, value):
        return self.const(name, np.array(value, dtype=self.w.np_dtype))

    def ints(self, name, values):
        return self.const(name, np.array(values, dtype=np.int64))

    def layer_norm(self, x, prefix):
        C = self.args.embd
        scale = self.weight(f"{prefix}.weight", [C], "ones")
        bias = self.weight(f"{prefix}.bias", [C])
        if self.args.opset >= 17:
            return self.op("LayerNormalization", [x, scale, bias], "ln",
                           axis=-1, epsilon=1e-5)
        # Opset < 17: decompose as torch.onnx.export does.
        mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
        d = self.op("Sub", [x, mean])
        var = self.op("ReduceMean", [self.op("Pow", [d, self.scalar("two", 2.0)])],
                      axes=[-1], keepdims=1)
        std = self.op("Sqrt", [self.op("Add", [var, self.scalar("eps", 1e-5)])])
        y = self.op("Div", [d, std])
        return self.op("Add", [self.op("Mul", [y, scale]), bias], "ln")

    def linear(self, x, prefix, n_in, n_out):
        w = self.weight(f"{prefix}.weight", [n_in, n_out])
        b = self.weight(f"{prefix}.bias", [n_out])
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def attention(self, x, prefix):
        a = self.args
        C, H, T = a.embd, a.heads, a.seq
        hd = C // H
        qkv = self.linear(x, f"{prefix}.c_attn", C, 3 * C)
        q, k, v = (f"{prefix}.{n}" for n in "qkv")
        self.nodes.append(helper.make_node(
            "Split", [qkv, self.ints("split_qkv", [C, C, C])], [q, k, v],
            name=f"{prefix}.split", axis=-1))
        heads = self.ints("shape_heads", [0, T, H, hd])    # 0 = copy batch dim
        q = self.op("Transpose", [self.op("Reshape", [q, heads])], perm=[0, 2, 1, 3])
        k = self.op("Transpose", [self.op("Reshape", [k, heads])], perm=[0, 2, 3, 1])
        v = self.op("Transpose", [self.op("Reshape", [v, heads])], perm=[0, 2, 1, 3])
        s = self.op("MatMul", [q, k])
        s = self.op("Mul", [s, self.scalar("attn_scale", 1.0 / math.sqrt(hd))])
        mask = self.const("causal_mask",
                          np.tril(np.ones((T, T), dtype=bool))[None, None])
        s = self.op("Where", [mask, s, self.scalar("neg_inf", -np.inf)])
        p = self.op("Softmax", [s], axis=-1)
        y = self.op("Transpose", [self.op("MatMul", [p, v])], perm=[0, 2, 1, 3])
        y = self.op("Reshape", [y, self.ints("shape_embd", [0, T, C])])
        return self.linear(y, f"{prefix}.c_proj", C, C)

    def mlp(self, x, prefix):
        C = self.args.embd
        h = self.linear(x, f"{prefix}.c_fc", C, 4 * C)
        # Exact GELU: 0.5 * x * (1 + erf(x / sqrt(2)))
        e = self.op("Erf", [self.op("Div", [h, self.scalar("sqrt2", math.sqrt(2.0))])])
        e = self.op("Add", [e, self.scalar("one", 1.0)])
        g = self.op("Mul", [self.op("Mul", [h, e]), self.scalar("half", 0.5)])
        return self.linear(g, f"{prefix}.c_proj", 4 * C, C)

    def build(self):
        a = self.args
        C, T = a.embd, a.seq
        wte = self.weight("transformer.wte.weight", [a.vocab, C])
        wpe = self.weight("transformer.wpe.weight", [a.block, C])
        x = self.op("Gather", [wte, "idx"], axis=0)
        pos = self.op("Slice", [wpe, self.ints("zero", [0]), self.ints("seq_len", [T]),
                                self.ints("axis0", [0])])
        x = self.op("Add", [x, pos])
        for i in range(a.layers):
            p = f"transformer.h.{i}"
            x = self.op("Add", [x, self.attention(self.layer_norm(x, f"{p}.ln_1"), f"{p}.attn")])
            x = self.op("Add", [x, self.mlp(self.layer_norm(x, f"{p}.ln_2"), f"{p}.mlp")])
        x = self.layer_norm(x, "transformer.ln_f")
        lm = self.weight("lm_head.weight", [C, a.vocab])
        self.nodes.append(helper.make_node("MatMul", [x, lm], ["logits"], name="lm_head"))

        idx = helper.make_tensor_value_info("idx", TensorProto.INT64, ["batch", T])
        logits = helper.make_tensor_value_info("logits", self.w.onnx_dtype,
                                               ["batch", T, a.vocab])
        graph = helper.make_graph(self.nodes, "gpt", [idx], [logits], self.inits)
        return helper.make_model(graph, producer_name="loom-make_gpt_onnx",
                                 opset_imports=[helper.make_opsetid("", a.opset)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output .onnx path (data goes to OUT.data)")
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--embd", type=int, default=1600)
    ap.add_argument("--heads", type=int, default=25)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--block", type=int, default=None,
                    help="rows of the position table (default: --seq)")
    ap.add_argument("--batch", type=int, default=1,
                    help="nominal batch (the input keeps dim_param 'batch')")
    ap.add_argument("--opset", type=int, default=17, choices=[14, 15, 16, 17])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-check", action="store_true", help="skip onnx.checker")
    a = ap.parse_args()
    a.block = a.block or a.seq
    if a.embd % a.heads or a.block < a.seq:
        ap.error("--embd must be divisible by --heads and --block >= --seq")

    t0 = time.time()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    writer = ExternalWriter(a.out + ".data", a.dtype, a.seed)
    model = GraphBuilder(writer, a).build()
    writer.close()
    onnx.save(model, a.out)   # tensors carry no raw_data, so nothing is rewritten
    t_gen = time.time() - t0
    if not a.no_check:
        onnx.checker.check_model(a.out)   # path form resolves external data
    print(f"wrote {a.out} ({os.path.getsize(a.out)} B) + {writer.location} "
          f"({writer.offset} B, {writer.count} tensors)\n"
          f"params {writer.numel:,} ({a.dtype}), layers={a.layers} embd={a.embd} "
          f"heads={a.heads} vocab={a.vocab} seq={a.seq} opset={a.opset}\n"
          f"generate {t_gen:.2f}s, total {time.time() - t0:.2f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
