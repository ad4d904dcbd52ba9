"""The model check, the share of each swapped layer and the Amdahl bound, on real (tiny) torch modules."""

from __future__ import annotations

import math
import time

import pytest
import torch

from kernel_agent.prove.model_ab import amdahl, check_outputs, shares


class Slow(torch.nn.Module):
    """A layer that sleeps: its share of the forward pass is known from outside."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.02)
        return x * 2


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.slow = Slow()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.02)
        return self.slow(x) + 1


def test_amdahl_bounds_the_model_by_the_share_the_ops_take() -> None:
    assert amdahl({"a": 0.05}, {"a": 3.0}) == pytest.approx(1 / (0.95 + 0.05 / 3))
    assert amdahl({"a": 0.5, "b": 0.5}, {"a": 2.0, "b": 2.0}) == pytest.approx(2.0)
    assert amdahl({"a": 0.2}, {}) is None  # no micro speedup vs eager: no bound claimed


def test_the_share_of_a_layer_is_its_time_in_the_forward_pass() -> None:
    net = Net()
    share = shares(net, {"slow": [net.slow]}, (torch.ones(3),))["slow"]
    assert 0.3 < share < 0.7  # 20 ms of about 40 ms


def test_outputs_are_checked_elementwise_within_the_tolerance() -> None:
    plain, inputs = Net(), {"x": (torch.ones(4),)}
    assert check_outputs(plain, Net(), inputs, (1e-4, 1e-5)).passed

    class Off(Net):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) + torch.tensor([0, 0, 0, 1e-3])

    found = check_outputs(plain, Off(), inputs, (1e-4, 1e-5))
    assert not found.passed and found.max_abs == pytest.approx(1e-3, rel=1e-3) and "output 0" in found.where

    class Nan(Net):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) * math.nan

    assert "NaN" in check_outputs(plain, Nan(), inputs, (1e-4, 1e-5)).where
