"""The bitwise comparison the checks use: exact, with NaN equal to NaN in the same place."""

from __future__ import annotations

import torch

from kernel_agent.regions.checks import _same


def test_bitwise_with_nans_in_the_same_places() -> None:
    a = torch.tensor([1.0, float("nan"), 3.0])
    assert _same(a, a.clone())
    assert not _same(a, torch.tensor([1.0, 2.0, 3.0]))
    assert not _same(a, torch.tensor([1.0, float("nan"), 3.0000002]))  # one ulp is a difference
    assert not _same(a, a.double())  # a dtype change is a difference
    assert _same(torch.tensor([1, 2]), torch.tensor([1, 2])) and not _same(torch.tensor([1, 2]), torch.tensor([1, 3]))
