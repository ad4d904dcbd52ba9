"""Writes only the first half of the output on the GPU; the rest is whatever the allocator held.

ROW: 2
EXPECT: incorrect
REASON: shape=
"""

import torch


def kernel(x):
    out = torch.empty_like(x)
    half = (x.shape[0] + 1) // 2
    out[:half] = torch.softmax(x[:half], dim=-1)
    return out
