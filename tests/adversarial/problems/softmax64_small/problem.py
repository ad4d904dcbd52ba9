"""Adversarial-suite problem: the softmax64 fixture at a sub-millisecond size (16 x 2048, about
0.2 ms per baseline call), where the harness's per-call overhead is as large as the work itself."""

import torch

DESCRIPTION = "row softmax, sub-millisecond (adversarial test problem)"
DEVICE = "cpu"
SHAPES = [(16, 2048)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130)]
DTYPES = ["float32"]


def reference(x):
    return torch.softmax(x, dim=-1)


def make_inputs(shape, dtype, device, generator):
    return (torch.randn(shape, generator=generator, dtype=dtype, device=device) * 2,)


def flops(shape):
    return 5 * shape[0] * shape[1]
