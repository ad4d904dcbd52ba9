"""The comparison rules, one failure mode each (docs/THREATS.md section 3.3), and the chunking that
bounds their memory."""

from __future__ import annotations

import pytest
import torch

from kernel_agent.evaluate import compare as compare_module
from kernel_agent.evaluate.compare import CHUNK_ELEMENTS, Tolerance, canary_outputs, compare

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


def test_a_few_values_near_zero_are_judged_against_what_the_reference_itself_could_do() -> None:
    """One element whose gold is near zero, where the float32 reference cancels: the reference's own output is
    off by 2e-4 on a gold of 3e-4 (a relative norm error of 0.6). An output with that error passes; one twice
    as far past it, and zeros on a larger output, still fail (the CI failure of stop 42, at shape [1, 1])."""
    gold = (torch.tensor([[3e-4]], dtype=torch.float64),)
    base = (torch.tensor([[5e-4]], dtype=torch.float32),)
    loose = Tolerance(1e-4, 1e-3, 1e-5)
    assert compare(base[0].clone(), gold, base, loose).passed
    far = compare(torch.tensor([[1.8e-3]]), gold, base, loose)
    assert not far.passed and far.mismatch.check == "allclose"
    worse = compare(torch.tensor([[-6e-4]]), gold, base, Tolerance(1e-4, 1e-2, 1e-5), precision=False)
    assert not worse.passed and "twice the reference's own" in worse.mismatch.message


def test_canaries_all_fail_on_a_healthy_problem() -> None:
    x, gold, base = _case()
    for name, outputs in canary_outputs(gold, base, [x]):
        assert not compare(outputs, gold, base, FP32).passed, name


def test_integer_outputs_must_match_exactly() -> None:
    gold = (torch.arange(12).reshape(3, 4),)
    assert compare(gold[0].clone(), gold, gold, FP32).passed
    off = gold[0].clone()
    off[2, 1] += 1
    result = compare(off, gold, gold, FP32)
    assert (
        result.mismatch.check == "exact"
        and result.mismatch.index == [2, 1]
        and (result.mismatch.got, result.mismatch.expected) == (10.0, 9.0)
    )


def test_non_finite_reference_values_must_be_reproduced_not_matched_loosely() -> None:
    gold = (torch.tensor([1.0, float("inf"), float("nan"), -float("inf")], dtype=torch.float64),)
    base = (gold[0].float(),)
    assert compare(gold[0].float(), gold, base, FP32).passed
    assert compare(torch.tensor([1.0, float("inf"), 0.0, -float("inf")]), gold, base, FP32).mismatch.check == "nan"
    assert compare(torch.tensor([1.0, 3e38, float("nan"), -float("inf")]), gold, base, FP32).mismatch.check == "nan"


def test_without_the_precision_rule_only_the_tolerances_judge() -> None:
    """A comparison against the same-dtype reference alone (large inputs) must not apply the baseline-error rule."""
    x, gold, base = _case()
    out = torch.softmax(x.half(), -1).float()
    loose = Tolerance(1e-2, 1e-2, 1e-2)
    assert compare(out, gold, base, loose).mismatch.check == "precision"
    assert compare(out, gold, base, loose, precision=False).passed


def big_case() -> tuple[torch.Tensor, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """5M elements: three chunks of 2M, the last one partial."""
    n = 5_000_000
    gold = torch.randn(n, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    return gold.float(), (gold.reshape(1000, 5000),), (gold.float().reshape(1000, 5000),)


def test_chunked_comparison_gives_the_whole_tensor_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Errors and the first bad index are the same whether the output is compared in chunks or at once."""
    assert CHUNK_ELEMENTS < 5_000_000 // 2
    flat, gold, base = big_case()
    flat[4_500_001] += 1.0  # in the third chunk
    flat[2_100_000:2_100_010] *= 1.0 + 2e-6  # within the tolerance, but an error the sums must count
    out = flat.reshape(1000, 5000)
    chunked = compare(out, gold, base, FP32)
    monkeypatch.setattr(compare_module, "CHUNK_ELEMENTS", 1 << 30)
    whole = compare(out, gold, base, FP32)
    assert not chunked.passed and chunked.mismatch.check == whole.mismatch.check == "allclose"
    assert chunked.mismatch.index == whole.mismatch.index == [900, 1]
    assert chunked.mismatch.message == whole.mismatch.message and "1 of 5000000 elements" in chunked.mismatch.message
    assert chunked.max_abs_error == whole.max_abs_error
    assert chunked.rel_norm_error == pytest.approx(whole.rel_norm_error, rel=1e-9)
    assert chunked.base_max_abs_error == whole.base_max_abs_error


def test_exhaustive_false_stops_at_the_first_chunk_that_fails() -> None:
    """The canaries only need to know a cheater fails; counting every bad element of a huge output is wasted work."""
    flat, gold, base = big_case()
    flat[10] += 1.0  # first chunk
    flat[4_999_999] += 1.0  # last chunk
    out = flat.reshape(1000, 5000)
    full = compare(out, gold, base, FP32)
    quick = compare(out, gold, base, FP32, exhaustive=False)
    assert full.mismatch.index == quick.mismatch.index == [0, 10]
    assert "2 of 5000000 elements" in full.mismatch.message and "1 of 5000000 elements" in quick.mismatch.message


def test_an_empty_output_of_the_right_shape_passes() -> None:
    empty = torch.empty(0, 3)
    assert compare(empty, (empty.double(),), (empty,), FP32).passed


def test_a_one_value_output_has_no_mean_canary_it_would_be_the_answer_itself() -> None:
    scalar = (torch.tensor(0.37),)
    names = [name for name, _ in canary_outputs(scalar, scalar, [torch.randn(4, 4)])]
    assert "mean" not in names and "zeros" in names
    rows = (torch.randn(3, 5),)
    assert "mean" in [name for name, _ in canary_outputs(rows, rows, [torch.randn(3, 5)])]


def test_the_same_dtype_comparison_doubles_the_tolerances_and_skips_the_precision_rule() -> None:
    from kernel_agent.evaluate.compare import compare_same_dtype

    base = (torch.ones(64),)
    tol = Tolerance(1e-4, 1e-4, 1e-4)
    assert compare_same_dtype((torch.ones(64) + 1.5e-4,), base, tol).passed  # within 2x, beyond 1x
    assert not compare((torch.ones(64) + 1.5e-4,), base, base, tol).passed
    assert not compare_same_dtype((torch.ones(64) + 3e-4,), base, tol).passed


# --- a same-dtype reference that is not finite where the gold is (a naive float32 log-sum-exp overflowing) ------

LOOSE = Tolerance(1e-2, 1e-2, 1e-2)


def _overflowing_lse(rows: int = 8) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """Rows 0..rows-1 hold logits near 100: exp overflows float32 there, so the naive reference is inf."""
    x = torch.randn(64, 128, generator=torch.Generator().manual_seed(3)) * 4
    x[:rows] += 100
    return x, (torch.logsumexp(x.double(), -1),), (torch.log(torch.exp(x).sum(-1)),)


def _half_lse(x: torch.Tensor) -> torch.Tensor:
    """A stable log-sum-exp computed in half precision: within a loose tolerance, far past float32's rounding."""
    h = x.half()
    m = h.max(-1).values
    return (m + torch.log(torch.exp(h - m[:, None]).sum(-1))).float()


def test_an_overflowing_reference_does_not_switch_the_precision_rule_off() -> None:
    x, gold, base = _overflowing_lse()
    assert not torch.isfinite(base[0]).all() and torch.isfinite(gold[0]).all()
    result = compare(_half_lse(x), gold, base, LOOSE)
    assert not result.passed and result.mismatch.check == "precision", result.mismatch
    assert "8 element(s) where the same-dtype reference is not finite" in result.mismatch.message
    assert result.reference_nonfinite == 8 and result.base_max_abs_error < 1e-3  # its finite rows' error only


def test_an_exact_candidate_passes_where_the_reference_overflowed_and_the_count_is_stated() -> None:
    x, gold, base = _overflowing_lse(rows=5)
    result = compare(torch.logsumexp(x, -1), gold, base, FP32)
    assert result.passed, result.mismatch
    assert result.reference_nonfinite == 5 and result.details[0]["reference_nonfinite"] == 5


def test_a_reference_nan_does_not_widen_the_norm_rule() -> None:
    """Near-zero outputs fail the norm rule; a NaN in the reference (inf - inf) must not lift its bound."""
    gold = (torch.full((1000,), 1e-5, dtype=torch.float64),)
    base = gold[0].float().clone()
    base[:3] = float("nan")
    result = compare(torch.zeros(1000), gold, (base,), Tolerance(1e-4, 1e-4, 1e-2), precision=False)
    assert not result.passed and result.mismatch.check == "norm", result.mismatch
    assert "3 element(s) where the same-dtype reference is not finite" in result.mismatch.message


def test_a_reference_overflow_beside_a_non_finite_gold_does_not_widen_either_rule() -> None:
    """The chunk with a non-finite gold takes the masked path: a reference inf elsewhere in it still counts as no
    allowance (it once became |gold| there, a bound as large as the output)."""
    x, gold, base = _overflowing_lse()
    gold = (gold[0].clone(),)
    gold[0][-1] = float("inf")
    base = (base[0].clone(),)
    base[0][-1] = float("inf")
    out = _half_lse(x)
    out[-1] = float("inf")
    result = compare(out, gold, base, LOOSE)
    assert not result.passed and result.mismatch.check == "precision", result.mismatch


def test_a_reference_not_finite_anywhere_leaves_the_gold_alone_to_judge() -> None:
    x, gold, base = _overflowing_lse(rows=64)
    assert not torch.isfinite(base[0]).any()
    assert compare(torch.logsumexp(x, -1), gold, base, FP32).passed
    off = torch.logsumexp(x, -1) * (1 + 1e-3)
    failed = compare(off, gold, base, FP32)
    assert not failed.passed and failed.mismatch.check == "allclose"
