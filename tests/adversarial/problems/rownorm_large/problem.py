"""Adversarial-suite problem: row L2 normalisation of a 4608 x 8192 float32 matrix (151 MB a call),
large enough that the timing loop serves its timed inputs from a reused pool, rescaled per call.
The operation is scale-invariant: the output for s * x is the output for x."""

import torch

DESCRIPTION = "row L2 normalisation, large inputs (adversarial test problem)"
DEVICE = "cpu"
SHAPES = [(4608, 8192)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130)]
DTYPES = ["float32"]


def reference(x):
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def make_inputs(shape, dtype, device, generator):
    return (torch.randn(shape, generator=generator, dtype=dtype, device=device),)


def flops(shape):
    return 3 * shape[0] * shape[1]
