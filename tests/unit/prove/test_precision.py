"""The whole-model precision rule (prove/model_ab.py precision_check): the swapped model's error against the
model run in float64 may be at most twice the unswapped model's own; a layer computing in half precision fails,
one that rounds differently in float32 passes."""

from __future__ import annotations

import copy

import torch

from kernel_agent.prove.model_ab import precision_check


class Norm(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), Norm(), torch.nn.Linear(64, 64)).eval()


INPUTS = {"b8": (torch.randn(8, 64, generator=torch.Generator().manual_seed(1)),)}


def test_a_layer_rounding_elsewhere_passes_and_one_in_half_precision_fails() -> None:
    plain = model()
    other = copy.deepcopy(plain)
    other[1].forward = lambda x: x / torch.sqrt(torch.mean(x * x, -1, keepdim=True) + 1e-5)  # same math, float32
    check = precision_check(plain, other, INPUTS)
    assert check.passed and check.plain > 0, check
    half = copy.deepcopy(plain)
    half[1].forward = lambda x: Norm()(x.half()).float()
    check = precision_check(plain, half, INPUTS)
    assert not check.passed and "b8: output 0" in check.where and check.swapped > 2 * check.plain, check
