"""Row-wise softmax cross-entropy with its log-sum-exp, loss per row, on the CPU (C++/OpenMP).

torch eager (`F.cross_entropy`) materialises the full log-softmax matrix, writing and reading as
many bytes again as the logits, before it gathers one value per row. A fused kernel reads each
row of logits once (the second pass over a row hits L1) and writes one float per row.
"""

import torch

DESCRIPTION = "loss[r] = logsumexp(logits[r]) - logits[r, target[r]], logits (rows, cols) float32, target (rows,) int64"
DEVICE = "cpu"
SHAPES = [(2048, 4096)]  # 32 MB of logits: past L2 and L3, one read for a fused kernel
CHECK_SHAPES = [(1, 5), (3, 17), (37, 130), (5, 1000), (2, 4099)]
DTYPES = ["float32"]
TUNABLES = {"THREADS": [1, 2], "ROW_BLOCK": [1, 4, 16, 64]}


def reference(logits, target):
    return torch.nn.functional.cross_entropy(logits, target, reduction="none")


def make_inputs(shape, dtype, device, generator):
    rows, cols = shape
    logits = 3 * torch.randn(rows, cols, generator=generator, dtype=dtype, device=device)
    target = torch.randint(0, cols, (rows,), generator=generator, device=device)
    return logits, target


def flops(shape):
    rows, cols = shape
    return 4 * rows * cols


def bytes_moved(shape, dtype):
    rows, cols = shape
    return rows * cols * torch.empty((), dtype=dtype).element_size() + rows * (8 + 4)
