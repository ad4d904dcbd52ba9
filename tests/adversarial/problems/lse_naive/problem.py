"""Adversarial-suite problem: a row log-sum-exp whose reference is the naive float32 formula, log(sum(exp(x))).
A quarter of each draw's rows hold logits near 100, where exp overflows float32: the same-dtype reference is
inf there and the float64 gold is not. The tolerance is loose (1e-2), so a kernel computing in bfloat16 stays
inside it; only the precision rule, judged on the reference's finite rows, can name it."""

import torch

DESCRIPTION = "row log-sum-exp, naive float32 reference that overflows on some rows (adversarial test problem)"
DEVICE = "cpu"
SHAPES = [(256, 1024)]
CHECK_SHAPES = [(1, 1), (3, 17), (37, 130)]
DTYPES = ["float32"]
TOLERANCES = {"float32": (1e-2, 1e-2)}
NORM_TOLERANCES = {"float32": 1e-2}
INPUT_DISTRIBUTIONS = ["normal"]


def reference(x):
    return torch.log(torch.exp(x).sum(dim=-1))


def make_inputs(shape, dtype, device, generator):
    x = torch.randn(shape, generator=generator, dtype=dtype, device=device) * 4
    x[: max(1, shape[0] // 4)] += 100
    return (x,)


def flops(shape):
    return 3 * shape[0] * shape[1]
