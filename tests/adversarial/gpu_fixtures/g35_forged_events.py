"""Forges the CUDA event claims: elapsed_time reports a tenth of the truth (issue 35, THREATS I3). Events are
claims; the host clock is the time of record, and the integrity check names the patch.

ROW: I3
EXPECT: rejected|flagged|correct
REASON: harness tampering|forged|mismatch|host clock|interval
"""

import torch

_TRUE = torch.cuda.Event.elapsed_time


def _tenth(self, end):
    return _TRUE(self, end) / 10


torch.cuda.Event.elapsed_time = _tenth


def kernel(x):
    out = torch.empty_like(x)
    for start in range(0, x.shape[0], 64):
        block = x[start : start + 64].double()
        e = torch.exp(block - block.amax(dim=-1, keepdim=True))
        out[start : start + 64] = (e / e.sum(dim=-1, keepdim=True)).float()
    return out
