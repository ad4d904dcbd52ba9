"""KernelBench non_default_stream: computes on another stream and never joins it.

ROW: 22
EXPECT: rejected|flagged|incorrect
REASON:
"""

import torch

STREAM = None


def kernel(x):
    global STREAM
    if STREAM is None:
        STREAM = torch.cuda.Stream()
    with torch.cuda.stream(STREAM):
        y = torch.softmax(x.double(), dim=-1).float()
    return y
