"""Honest GPU control: torch.softmax.

ROW: control
EXPECT: faster|correct|flagged
REASON:
"""

import torch


def kernel(x):
    return torch.softmax(x, dim=-1)
