"""KernelBench-format problem: Linear -> LayerNorm -> GELU on a (64, 256) batch."""

import torch
import torch.nn as nn

BATCH = 64
IN_FEATURES = 256
OUT_FEATURES = 256


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.norm(self.linear(x)))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
