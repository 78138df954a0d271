#!/usr/bin/env python3
"""A small MLP whose ONNX export computes its own loss,
nn.CrossEntropyLoss(weight=..., ignore_index=2) (SoftmaxCrossEntropyLoss
with class weights), and PyTorch's per-step SGD losses training it
(weighted-loss.test).

    weighted_loss.py OUT_DIR
Writes model.onnx (inputs x, y; output loss), x.npy, y.npy (8 samples),
torch_losses.txt (one loss per step of 6 SGD steps, lr 0.1, batches of 4).
"""
import sys

import numpy as np
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(),
                                       torch.nn.Linear(8, 5))
        self.loss = torch.nn.CrossEntropyLoss(
            weight=torch.tensor([0.5, 2.0, 1.0, 0.25, 3.0]), ignore_index=2)

    def forward(self, x, y):
        return self.loss(self.net(x), y)


out = sys.argv[1]
torch.manual_seed(0)
model = Model()
gen = torch.Generator().manual_seed(1)
x = torch.randn(8, 6, generator=gen)
y = torch.tensor([0, 1, 2, 3, 4, 1, 2, 0])
torch.onnx.export(model, (x[:4], y[:4]), out + "/model.onnx", opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, input_names=["x", "y"],
                  output_names=["loss"])
np.save(out + "/x.npy", x.numpy())
np.save(out + "/y.npy", y.numpy())
optimizer = torch.optim.SGD(model.net.parameters(), lr=0.1)
with open(out + "/torch_losses.txt", "w") as f:
    for step in range(6):
        rows = [(step * 4 + j) % 8 for j in range(4)]
        loss = model(x[rows], y[rows])
        f.write("%.9g\n" % loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
