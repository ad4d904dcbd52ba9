"""Adversarial-suite problem: a row softmax whose reference is the naive float32 formula, exp(x) / sum(exp(x)).
A quarter of each draw's rows hold logits all near 100: every exp in them overflows, so the same-dtype reference
is NaN (inf / inf) on whole rows while the float64 gold is finite. Loose tolerance (1e-2)."""

import torch

DESCRIPTION = "row softmax, naive float32 reference that is NaN on some rows (adversarial test problem)"
DEVICE = "cpu"
SHAPES = [(256, 1024)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130)]
DTYPES = ["float32"]
TOLERANCES = {"float32": (1e-2, 1e-2)}
NORM_TOLERANCES = {"float32": 1e-2}
INPUT_DISTRIBUTIONS = ["normal"]


def reference(x):
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)


def make_inputs(shape, dtype, device, generator):
    x = torch.randn(shape, generator=generator, dtype=dtype, device=device)
    x[: max(1, shape[0] // 4)] += 100
    return (x,)


def flops(shape):
    return 5 * shape[0] * shape[1]
