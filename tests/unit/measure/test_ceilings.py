"""Which measured matmul rate a dtype may claim as its ceiling."""

from __future__ import annotations

from kernel_agent.measure.ceilings import Ceilings, peak_rate

TOY = Ceilings(fingerprint="toy", device_name="toy cpu", memory_gbps=20.0, gflops={"float32": 100.0})


def test_a_dtype_may_use_the_rate_of_a_wider_dtype_never_a_narrower_one() -> None:
    assert peak_rate({"float32": 180.0, "bfloat16": 1.35}, "bfloat16") == (
        180.0,
        "float32",
    )  # bfloat16 data through float32 FMAs
    rates = {"float32": 180.0, "float16": 900.0}
    assert peak_rate(rates, "float32") == (180.0, "float32")  # half-precision tensor cores are no float32 ceiling
    assert peak_rate(rates, "float16") == (900.0, "float16")
    assert peak_rate(rates, "bfloat16") == (900.0, "float16")  # the rule is the width alone: 16 bits may use 16 bits


def test_with_nothing_wide_enough_the_fastest_rate_stands_in() -> None:
    """An optimistic stand-in: a floor too low is a missed flag, a floor too high would flag honest kernels."""
    assert peak_rate({"float32": 180.0, "bfloat16": 300.0}, "float64") == (300.0, "bfloat16")
    assert peak_rate({"float32": 180.0}, "not_a_dtype") == (180.0, "float32")


def test_unmeasured_or_non_positive_rates_are_ignored_and_ties_prefer_the_dtype_itself() -> None:
    assert peak_rate({}, "float32") == (None, None)
    assert peak_rate({"float32": 0.0, "float64": -1.0}, "float32") == (None, None)
    assert peak_rate({"float64": 0.0, "float32": 50.0}, "float64") == (50.0, "float32")
    assert peak_rate({"float64": 100.0, "float32": 100.0}, "float32") == (100.0, "float32")
    assert TOY.peak_gflops("bfloat16") == peak_rate(TOY.gflops, "bfloat16")
