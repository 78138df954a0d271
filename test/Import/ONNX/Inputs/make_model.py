#!/usr/bin/env python3
"""Writes small binary ONNX models for the importer's lit tests.

Run with Debian's /usr/bin/python3 (lit's %python), which has onnx/numpy:

  make_model.py named OUT.onnx          nodes with names; one bad Reshape
  make_model.py external OUT.onnx       weights in OUT.onnx.data
  make_model.py truncate IN OUT N       the first N bytes of IN
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def named(out):
    # The Reshape asks for 7 elements of a 2x3 tensor: the error must name it.
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="/encoder/act/Relu"),
        helper.make_node("Reshape", ["r", "shape"], ["y"],
                         name="/encoder/view/Reshape"),
    ]
    graph = helper.make_graph(
        nodes, "named",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([7], dtype=np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, out)


def external(out):
    # w (4x8 floats) and b (8 floats) live in OUT.data at 64-byte offsets.
    w = np.arange(32, dtype=np.float32).reshape(4, 8) / 8
    b = np.linspace(-1, 1, 8, dtype=np.float32)
    data_name = out.split("/")[-1] + ".data"
    with open(out + ".data", "wb") as f:
        f.write(w.tobytes())
        f.write(b"\0" * (128 - w.nbytes))
        f.write(b.tobytes())

    def ext(name, array, offset):
        tensor = TensorProto()
        tensor.name = name
        tensor.data_type = TensorProto.FLOAT
        tensor.dims.extend(array.shape)
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", data_name), ("offset", str(offset)),
                           ("length", str(array.nbytes))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        return tensor

    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc")]
    graph = helper.make_graph(
        nodes, "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [ext("w", w, 0), ext("b", b, 128)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, out)


def truncate(src, out, size):
    with open(src, "rb") as f:
        data = f.read()
    with open(out, "wb") as f:
        f.write(data[:int(size)])


if __name__ == "__main__":
    {"named": named, "external": external, "truncate": truncate}[sys.argv[1]](
        *sys.argv[2:])
