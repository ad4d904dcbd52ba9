"""Adversarial-suite problem: elementwise tanh, inputs moderate (randn), so tanh written through exp is exact on
every declared draw; only the hard "large" draw reaches exp's overflow (inf / inf)."""

import torch

DESCRIPTION = "elementwise tanh, moderate inputs (adversarial test problem)"
DEVICE = "cpu"
SHAPES = [(512, 2048)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130)]
DTYPES = ["float32"]


def reference(x):
    return torch.tanh(x)


def make_inputs(shape, dtype, device, generator):
    return (torch.randn(shape, generator=generator, dtype=dtype, device=device),)


def flops(shape):
    return 4 * shape[0] * shape[1]
