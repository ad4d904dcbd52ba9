"""Adversarial-suite problem: the softmax64 fixture at a size whose baseline call (about 0.05 ms)
is shorter than the harness's own per-call overhead (thaw, request, reply)."""

import torch

DESCRIPTION = "row softmax, tens of microseconds (adversarial test problem)"
DEVICE = "cpu"
SHAPES = [(4, 512)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130)]
DTYPES = ["float32"]


def reference(x):
    return torch.softmax(x, dim=-1)


def make_inputs(shape, dtype, device, generator):
    return (torch.randn(shape, generator=generator, dtype=dtype, device=device) * 2,)


def flops(shape):
    return 5 * shape[0] * shape[1]
