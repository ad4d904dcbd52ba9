"""The comparison rules, one failure mode each (THREATS.md section 3.3)."""

from __future__ import annotations

import torch

from kernel_agent.evaluate.compare import Tolerance, canary_outputs, compare

FP32 = Tolerance(1e-4, 1e-4, 1e-5)


def _case(seed: int = 0) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    x = torch.randn(64, 128, generator=torch.Generator().manual_seed(seed))
    return x, (torch.softmax(x.double(), -1),), (torch.softmax(x, -1),)


def test_exact_reference_passes() -> None:
    x, gold, base = _case()
    assert compare(torch.softmax(x, -1), gold, base, FP32).passed


def test_first_mismatch_is_located() -> None:
    x, gold, base = _case()
    out = torch.softmax(x, -1)
    out[5, 7] += 0.5
    result = compare(out, gold, base, FP32)
    assert not result.passed and result.mismatch is not None
    assert result.mismatch.check == "allclose"
    assert result.mismatch.index == [5, 7]
    assert "first at [5, 7]" in result.mismatch.message


def test_precision_downgrade_is_caught_by_error_versus_baseline() -> None:
    x, gold, base = _case()
    out = torch.softmax(x.half(), -1).float()  # within 1e-4 of many values, far worse than fp32
    result = compare(out, gold, base, Tolerance(1e-2, 1e-2, 1e-2))  # even under a loose elementwise tolerance
    assert not result.passed
    assert result.mismatch.check == "precision"


def test_nan_shape_dtype_and_count() -> None:
    x, gold, base = _case()
    good = torch.softmax(x, -1)
    nan = good.clone()
    nan[0, 0] = float("nan")
    assert compare(nan, gold, base, FP32).mismatch.check == "nan"
    assert compare(good[:, :10], gold, base, FP32).mismatch.check == "shape"
    assert compare(good.double(), gold, base, FP32).mismatch.check == "dtype"
    assert compare((good, good), gold, base, FP32).mismatch.check == "count"
    assert compare("not a tensor", gold, base, FP32).mismatch.check == "type"


def test_near_zero_outputs_fail_the_normwise_rule() -> None:
    gold = (torch.full((1000,), 1e-5, dtype=torch.float64),)
    base = (gold[0].float(),)
    zeros = torch.zeros(1000)
    # elementwise passes (|0 - 1e-5| <= 1e-4), the normwise rule does not
    result = compare(zeros, gold, base, FP32)
    assert not result.passed and result.mismatch.check in ("precision", "norm")


def test_canaries_all_fail_on_a_healthy_problem() -> None:
    x, gold, base = _case()
    for name, outputs in canary_outputs(gold, base, [x]):
        assert not compare(outputs, gold, base, FP32).passed, name
