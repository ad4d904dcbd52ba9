"""The prompt's profile: per-shape entries, the geometric mean of the fractions of the floor, the warning."""

from __future__ import annotations

import pytest
from conftest import timing_record

from kernel_agent.core.timing_result import Summary
from kernel_agent.measure.ceilings import Ceilings
from kernel_agent.measure.profile import build_profile
from kernel_agent.measure.roofline import RooflineRow, SideTime
from kernel_agent.measure.work import WorkCounts

TOY = Ceilings(fingerprint="toy", device_name="toy cpu", memory_gbps=20.0, gflops={"float32": 100.0})


def rows() -> list[RooflineRow]:
    small = WorkCounts(None, 8192, None, "none")
    large = WorkCounts(10**9, 32768, 30517.6, "declared")
    return [
        RooflineRow((1024,), "float32", small, 0.5, "memory", baseline=SideTime.at(1.0, small, 0.5)),
        RooflineRow((4096,), "float32", large, 8.0, "compute", baseline=SideTime.at(4.0, large, 8.0)),
    ]


def test_the_profile_takes_the_geometric_mean_of_the_fractions_and_names_what_beats_the_floor() -> None:
    timing = timing_record(baseline=Summary(2.0, 1.5, 3.0, 2.0, 40))
    profile = build_profile(None, timing, TOY, rows=rows())  # type: ignore[arg-type]
    assert profile["fraction_of_floor"] == pytest.approx(1.0) and profile["bound"] == "mixed"
    assert profile["baseline_median_ms"] == 2.0 and profile["ceilings"]["memory_gbps"] == 20.0
    assert profile["shape 1024 (float32)"] == {
        "bytes": 8192,
        "floor_ms": 0.5,
        "bound": "memory",
        "median_ms": 1.0,
        "achieved_gbps": 0.008192,
        "fraction_of_floor": 0.5,
    }
    assert profile["warning"] == (
        "the baseline beats the roofline floor at shape 4096 "
        "(float32): the declared flops/bytes or the ceilings are off"
    )


def test_a_candidate_profile_reads_the_candidate_side_and_leaves_the_ceilings_out() -> None:
    work = WorkCounts(None, 8192, None, "none")
    row = RooflineRow(
        (1024,), "float32", work, 0.5, "memory", SideTime.at(1.0, work, 0.5), SideTime.at(0.25, work, 0.5)
    )
    profile = build_profile(None, None, TOY, rows=[row], role="candidate")  # type: ignore[arg-type]
    assert profile["shape 1024 (float32)"]["median_ms"] == 0.25 and "ceilings" not in profile
    assert profile["warning"].startswith("this kernel beats the roofline floor")
