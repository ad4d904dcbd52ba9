"""Roofline arithmetic: floors from ceilings and work counts, and which measured rate a dtype may claim."""

from __future__ import annotations

import pytest
from conftest import timing_record

from kernel_agent.core.timing_result import Summary
from kernel_agent.measure.profile import Ceilings, WorkCounts, build_profile, peak_rate, roofline, roofline_record

# 20 GB/s and 100 GFLOP/s float32: the ridge sits at 5 FLOP per byte.
TOY = Ceilings(fingerprint="toy", device_name="toy cpu", memory_gbps=20.0, gflops={"float32": 100.0})


def counts(flops: int | None, nbytes: int) -> WorkCounts:
    return WorkCounts(flops, nbytes, flops / nbytes if flops else None, "declared" if flops else "none")


def test_a_low_intensity_kernel_is_floored_by_memory() -> None:
    line = roofline(counts(flops=4_000_000, nbytes=8_000_000), TOY, "float32")  # 0.5 FLOP/byte
    assert line["memory_floor_ms"] == pytest.approx(0.4) and line["compute_floor_ms"] == pytest.approx(0.04)
    assert line["floor_ms"] == pytest.approx(0.4) and line["bound"] == "memory"
    assert line["ridge_intensity"] == pytest.approx(5.0) and line["peak_dtype"] == "float32"


def test_a_high_intensity_kernel_is_floored_by_compute() -> None:
    line = roofline(counts(flops=2 * 1024**3, nbytes=3 * 1024**2 * 4), TOY, "float32")  # a 1024^3 matmul
    assert line["compute_floor_ms"] == pytest.approx(2 * 1024**3 / 100e9 * 1e3)
    assert line["floor_ms"] == line["compute_floor_ms"] and line["bound"] == "compute"


def test_unknown_flops_or_no_measured_rate_leave_the_memory_floor() -> None:
    """FlopCounterMode sees no elementwise work: an unknown count must not become a floor of zero."""
    line = roofline(counts(flops=None, nbytes=8_000_000), TOY, "float32")
    assert line["compute_floor_ms"] is None and line["floor_ms"] == pytest.approx(0.4) and line["bound"] == "memory"
    bare = Ceilings(fingerprint="bare", device_name="bare", memory_gbps=20.0)
    line = roofline(counts(flops=10**12, nbytes=8_000_000), bare, "float32")
    assert line["peak_gflops"] is None and line["ridge_intensity"] is None and line["floor_ms"] == pytest.approx(0.4)


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


def rows() -> list[dict]:
    return [
        {
            "shape": [1024],
            "dtype": "float32",
            "flops": None,
            "bytes": 8192,
            "intensity": None,
            "floor_ms": 0.5,
            "bound": "memory",
            "baseline_median_ms": 1.0,
            "baseline_gbps": 8.2,
            "baseline_gflops": None,
            "baseline_fraction_of_floor": 0.5,
        },
        {
            "shape": [4096],
            "dtype": "float32",
            "flops": 10**9,
            "bytes": 32768,
            "intensity": 30517.6,
            "floor_ms": 8.0,
            "bound": "compute",
            "baseline_median_ms": 4.0,
            "baseline_gbps": 8.2,
            "baseline_gflops": 250.0,
            "baseline_fraction_of_floor": 2.0,
            "baseline_faster_than_floor": True,
        },
    ]


def test_the_profile_takes_the_geometric_mean_of_the_fractions_and_names_what_beats_the_floor() -> None:
    timing = timing_record(baseline=Summary(2.0, 1.5, 3.0, 2.0, 40))
    profile = build_profile(None, timing, "cpu", TOY, rows=rows())  # type: ignore[arg-type]
    assert profile["fraction_of_floor"] == pytest.approx(1.0) and profile["bound"] == "mixed"
    assert profile["baseline_median_ms"] == 2.0 and profile["ceilings"]["memory_gbps"] == 20.0
    assert profile["shape 1024 (float32)"] == {
        "bytes": 8192,
        "floor_ms": 0.5,
        "bound": "memory",
        "median_ms": 1.0,
        "achieved_gbps": 8.2,
        "fraction_of_floor": 0.5,
    }
    assert profile["warning"] == (
        "the baseline beats the roofline floor at shape 4096 "
        "(float32): the declared flops/bytes or the ceilings are off"
    )


def test_the_stored_roofline_record_keeps_only_known_fields_with_values() -> None:
    record = roofline_record(rows(), TOY)
    assert record["memory_gbps"] == 20.0 and record["gflops"] == {"float32": 100.0}
    assert record["shapes"][0] == {
        "shape": [1024],
        "dtype": "float32",
        "bytes": 8192,
        "floor_ms": 0.5,
        "bound": "memory",
        "baseline_median_ms": 1.0,
    }
