"""Adversarial-suite problem: a row log-softmax whose own inputs are moderate (randn), so a formula without the
max shift is exact on every declared draw; only the hard draws reach exp's overflow."""

import torch

DESCRIPTION = "row log-softmax, moderate inputs (adversarial test problem)"
DEVICE = "cpu"
SHAPES = [(256, 1024)]
CHECK_SHAPES = [(2, 5), (3, 17), (37, 130)]
DTYPES = ["float32"]


def reference(x):
    return torch.log_softmax(x, dim=-1)


def make_inputs(shape, dtype, device, generator):
    return (torch.randn(shape, generator=generator, dtype=dtype, device=device),)


def flops(shape):
    return 5 * shape[0] * shape[1]
