"""The per-side times shown in run tables agree with the speedup beside them."""

import pytest

from kernel_agent.timing import speedup_interval, typical_ms


def test_typical_times_multiply_out_to_the_speedup_across_shapes() -> None:
    # Two shapes of very different size (like torch_attention): a pooled median would sit
    # between them and its ratio would not be the geometric-mean speedup.
    base = [[[10.0, 10.2, 9.9]] * 4, [[1.0, 1.02, 0.99]] * 4]
    cand = [[[5.0, 5.1, 4.9]] * 4, [[1.0, 1.01, 0.98]] * 4]
    estimate = speedup_interval(base, cand)
    timing = {"per_shape": estimate.per_shape}
    assert typical_ms(timing, "baseline") / typical_ms(timing, "candidate") == pytest.approx(estimate.speedup, rel=1e-9)
    assert estimate.baseline.median_ms / estimate.candidate.median_ms != pytest.approx(estimate.speedup, rel=0.05)


def test_typical_ms_refuses_incomplete_timings() -> None:
    assert typical_ms(None, "baseline") is None
    assert typical_ms({"per_shape": [{"baseline_median_ms": 1.0}, {"baseline_median_ms": 0}]}, "baseline") is None
    assert typical_ms({"per_shape": [{"candidate_median_ms": 2.0}]}, "baseline") is None
