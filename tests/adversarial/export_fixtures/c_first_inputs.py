"""Keys on the first inputs it sees: right on the first call of each shape, 3% wrong on every later one (a check
that draws one case per shape and stops never sees the difference). A second round of fresh draws, after the
first round's outputs came back, catches it.

ROW: X2
EXPECT: refused
REASON: it is wrong
"""

import torch

SEEN = set()


def kernel(x):
    out = torch.softmax(x, dim=-1)
    key = (tuple(x.shape), x.dtype)
    if key in SEEN:
        return out * 1.03
    SEEN.add(key)
    return out
