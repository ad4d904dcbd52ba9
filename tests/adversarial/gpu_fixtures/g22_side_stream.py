"""Launches the real work on a non-blocking side stream so events on the harness stream miss it.

ROW: 22
EXPECT: rejected|flagged
REASON: mismatch|host clock
"""

import torch

SIDE = None


def _slow(x):
    out = torch.empty_like(x)
    for start in range(0, x.shape[0], 64):
        block = x[start : start + 64].double()
        e = torch.exp(block - block.amax(dim=-1, keepdim=True))
        out[start : start + 64] = (e / e.sum(dim=-1, keepdim=True)).float()
    return out


def kernel(x):
    global SIDE
    if SIDE is None:
        SIDE = torch.cuda.Stream()
    SIDE.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(SIDE):
        out = _slow(x)
    return out
