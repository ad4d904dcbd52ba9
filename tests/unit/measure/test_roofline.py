"""Roofline arithmetic (floors from ceilings and work counts) and the typed row a verdict stores a part of."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from kernel_agent.measure.ceilings import Ceilings
from kernel_agent.measure.roofline import RooflineRow, SideTime, roofline, roofline_record
from kernel_agent.measure.work import WorkCounts

# 20 GB/s and 100 GFLOP/s float32: the ridge sits at 5 FLOP per byte.
TOY = Ceilings(fingerprint="toy", device_name="toy cpu", memory_gbps=20.0, gflops={"float32": 100.0})
LEGACY = Path(__file__).parents[2] / "fixtures" / "legacy" / "runs-5dcc3dc.db"


def counts(flops: int | None, nbytes: int) -> WorkCounts:
    return WorkCounts(flops, nbytes, flops / nbytes if flops else None, "declared" if flops else "none")


def test_a_low_intensity_kernel_is_floored_by_memory() -> None:
    line = roofline(counts(flops=4_000_000, nbytes=8_000_000), TOY, "float32")  # 0.5 FLOP/byte
    assert line.memory_floor_ms == pytest.approx(0.4) and line.compute_floor_ms == pytest.approx(0.04)
    assert line.floor_ms == pytest.approx(0.4) and line.bound == "memory"
    assert line.ridge_intensity == pytest.approx(5.0) and line.peak_dtype == "float32"


def test_a_high_intensity_kernel_is_floored_by_compute() -> None:
    line = roofline(counts(flops=2 * 1024**3, nbytes=3 * 1024**2 * 4), TOY, "float32")  # a 1024^3 matmul
    assert line.compute_floor_ms == pytest.approx(2 * 1024**3 / 100e9 * 1e3)
    assert line.floor_ms == line.compute_floor_ms and line.bound == "compute"


def test_unknown_flops_or_no_measured_rate_leave_the_memory_floor() -> None:
    """FlopCounterMode sees no elementwise work: an unknown count must not become a floor of zero."""
    line = roofline(counts(flops=None, nbytes=8_000_000), TOY, "float32")
    assert line.compute_floor_ms is None and line.floor_ms == pytest.approx(0.4) and line.bound == "memory"
    bare = Ceilings(fingerprint="bare", device_name="bare", memory_gbps=20.0)
    line = roofline(counts(flops=10**12, nbytes=8_000_000), bare, "float32")
    assert line.peak_gflops is None and line.ridge_intensity is None and line.floor_ms == pytest.approx(0.4)


def test_a_side_under_the_floor_by_more_than_the_slack_is_faster_than_the_floor() -> None:
    work = counts(flops=None, nbytes=8_000_000)
    assert SideTime.at(0.35, work, 0.4).faster_than_floor is True  # 0.35 < 0.9 * 0.4
    assert SideTime.at(0.37, work, 0.4).faster_than_floor is False
    untimed_floor = SideTime.at(0.35, work, None)
    assert untimed_floor.faster_than_floor is None and untimed_floor.fraction_of_floor is None
    assert SideTime.at(2.0, work, 0.4).gbps == pytest.approx(4.0) and SideTime.at(2.0, work, 0.4).gflops is None


def rows() -> list[RooflineRow]:
    small, large = counts(None, 8192), counts(10**9, 32768)
    return [
        RooflineRow((1024,), "float32", small, 0.5, "memory", baseline=SideTime.at(1.0, small, 0.5)),
        RooflineRow((4096,), "float32", large, 8.0, "compute", baseline=SideTime.at(4.0, large, 8.0)),
    ]


def test_the_stored_roofline_record_keeps_only_known_fields_with_values() -> None:
    record = roofline_record(rows(), TOY)
    assert record["memory_gbps"] == 20.0 and record["gflops"] == {"float32": 100.0}
    assert json.dumps(record["shapes"][0]) == json.dumps(
        {
            "shape": [1024],
            "dtype": "float32",
            "bytes": 8192,
            "floor_ms": 0.5,
            "bound": "memory",
            "baseline_median_ms": 1.0,
        }
    )  # the keys in their stored order


def test_the_detail_row_names_each_side_only_where_it_was_timed() -> None:
    detail = rows()[1].detail()
    assert detail["baseline_fraction_of_floor"] == 2.0 and detail["baseline_faster_than_floor"] is True
    assert not any(key.startswith("candidate_") for key in detail)
    bare = RooflineRow((4,), "float32", counts(None, 16), baseline=SideTime.at(1.0, counts(None, 16), None))
    assert "floor_ms" not in bare.detail() and "baseline_fraction_of_floor" not in bare.detail()


def test_every_stored_roofline_row_reads_back_and_writes_out_byte_identical() -> None:
    """The stored JSON must not change with the row's type: verdicts stored before it read back the same."""
    engine = create_engine(f"sqlite:///{LEGACY}")
    with engine.connect() as connection:
        verdicts = [json.loads(v) for (v,) in connection.execute(text("SELECT verdict FROM evaluations"))]
    engine.dispose()
    stored = [shape for v in verdicts if v.get("roofline") for shape in v["roofline"]["shapes"]]
    assert stored, "the legacy fixture holds verdicts with a roofline"
    for shape in stored:
        row = RooflineRow.from_json(shape)
        assert json.dumps(row.to_json()) == json.dumps(shape)
        assert row.candidate is not None and row.candidate.median_ms == shape["candidate_median_ms"]
