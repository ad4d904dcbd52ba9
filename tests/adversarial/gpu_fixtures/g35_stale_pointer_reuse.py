"""Computes honestly on an input pointer it has not seen, and returns the last output for a pointer it has
(issue 35, THREATS I4): the device path's timed inputs sit in the same trusted buffers every request, with
fresh values; the audits compare with a gold of this call's inputs.

ROW: I4
EXPECT: incorrect
REASON: audited timed call|mismatch|differs|exceed
"""

import torch

SEEN = {}


def kernel(x):
    key = (x.data_ptr(), tuple(x.shape))
    if key not in SEEN:
        SEEN[key] = torch.softmax(x, dim=-1)
        return SEEN[key].clone()
    return SEEN[key].clone()
