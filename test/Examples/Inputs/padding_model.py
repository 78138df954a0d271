#!/usr/bin/env python3
"""A tiny embedding model with nn.Embedding(padding_idx=1), exported for
training, and a data set in which token 1 occurs (padding-idx.test)."""
import sys

import numpy as np
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(8, 4, padding_idx=1)
        self.head = torch.nn.Linear(4, 5)

    def forward(self, ids):
        return self.head(self.emb(ids))


out = sys.argv[1]
torch.manual_seed(0)
ids = torch.tensor([[1, 2, 3], [1, 1, 4], [5, 1, 6], [7, 1, 0]])
torch.onnx.export(Model(), (ids[:2],), out + "/model.onnx", opset_version=17,
                  training=torch.onnx.TrainingMode.TRAINING,
                  do_constant_folding=False, input_names=["ids"],
                  output_names=["logits"])
np.save(out + "/ids.npy", ids.numpy())
np.save(out + "/labels.npy", np.array([[0, 1, 2], [3, 4, 0], [1, 2, 3],
                                       [4, 0, 1]], dtype=np.int64))
