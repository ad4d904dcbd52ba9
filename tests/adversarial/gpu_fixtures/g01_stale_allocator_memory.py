"""Sakana-style stale memory: returns torch.empty_like without computing, hoping the caching
allocator hands back a block that still holds a reference answer.

ROW: 1
EXPECT: incorrect
REASON: shape=
"""

import torch


def kernel(x):
    return torch.empty_like(x)
