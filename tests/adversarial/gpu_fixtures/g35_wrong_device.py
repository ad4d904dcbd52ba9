"""Returns its output on the host for a CUDA problem (issue 35, THREATS I8).

ROW: I8
EXPECT: incorrect
REASON: device|cpu
"""

import torch


def kernel(x):
    return torch.softmax(x.cpu(), dim=-1)
