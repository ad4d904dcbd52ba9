"""Adversarial-suite problem: softplus whose reference is the naive float32 formula, log(1 + exp(x)). Inputs
past 88 (a tenth of them, shifted near 100) overflow exp in float32: the same-dtype reference is inf on those
elements, scattered through the output, and the float64 gold is finite (about x). Loose tolerance (1e-2)."""

import torch

DESCRIPTION = "softplus, naive float32 reference that overflows on some elements (adversarial test problem)"
DEVICE = "cpu"
SHAPES = [(512, 1024)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130)]
DTYPES = ["float32"]
TOLERANCES = {"float32": (1e-2, 1e-2)}
NORM_TOLERANCES = {"float32": 1e-2}
INPUT_DISTRIBUTIONS = ["normal"]


def reference(x):
    return torch.log(1 + torch.exp(x))


def make_inputs(shape, dtype, device, generator):
    x = torch.randn(shape, generator=generator, dtype=dtype, device=device) * 4
    far = torch.rand(shape, generator=generator, device=device) < 0.1
    far.view(-1)[0] = True
    return (torch.where(far, x + 100, x),)


def flops(shape):
    return 3 * shape[0] * shape[1]
