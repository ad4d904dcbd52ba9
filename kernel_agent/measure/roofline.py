"""Where a kernel stands against the machine's ceilings, per benchmark shape: the floor time of one call,
max(flops / peak, bytes / bandwidth), which term binds, and each side's measured time against it.

`RooflineRow` is the typed row the decision's floor check, the prompt's profile and `kernel-agent profile`
read; a verdict stores a few of its fields for the report's chart (`roofline_record`, `RooflineRow.to_json`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

from kernel_agent.core.timing_result import ShapeTiming, TimingResult
from kernel_agent.measure.ceilings import Ceilings
from kernel_agent.measure.work import WorkCounts, work_counts
from kernel_agent.problem.load import Problem

SUSPICIOUS_SLACK = 0.9  # measured under this share of the floor: faster than physics allows, flagged

Bound = Literal["memory", "compute"]
Role = Literal["baseline", "candidate"]
ROLES: tuple[Role, ...] = ("baseline", "candidate")


def positive(value: Any) -> bool:
    """A finite number above zero (not a bool): a time or a rate that can be divided by."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def fraction_of_floor(measured_ms: float | None, floor_ms: float | None) -> float | None:
    """floor / measured: in (0, 1] for an honest kernel, 1 = at the roofline; > 1 is faster than physics allows."""
    if not positive(measured_ms) or not positive(floor_ms):
        return None
    return float(floor_ms) / float(measured_ms)  # type: ignore[arg-type]


def is_faster_than_floor(measured_ms: float | None, floor_ms: float | None, slack: float = SUSPICIOUS_SLACK) -> bool:
    """True when a measured time beats the floor by more than the slack (measured < slack * floor): suspicious."""
    if not positive(measured_ms) or not positive(floor_ms):
        return False
    return float(measured_ms) < slack * float(floor_ms)  # type: ignore[arg-type]


# --- the floor of one call ------------------------------------------------------------------------


@dataclass(frozen=True)
class Floor:
    """The floor time of one call and the two terms it is the larger of."""

    floor_ms: float
    bound: Bound
    memory_floor_ms: float
    compute_floor_ms: float | None  # None: FLOPs unknown or no measured rate
    ridge_intensity: float | None  # FLOP/byte where the two floors meet
    peak_gflops: float | None
    peak_dtype: str | None
    memory_gbps: float


def roofline(counts: WorkCounts, ceilings: Ceilings, dtype: str) -> Floor:
    """The floor time of one call: max(flops / peak, bytes / bandwidth), and which term binds."""
    memory_ms = counts.bytes / (ceilings.memory_gbps * 1e9) * 1e3
    peak, peak_dtype = ceilings.peak_gflops(dtype)
    compute_ms = counts.flops / (peak * 1e9) * 1e3 if counts.flops and peak else None
    return Floor(
        floor_ms=max(memory_ms, compute_ms or 0.0),
        bound="compute" if compute_ms is not None and compute_ms > memory_ms else "memory",
        memory_floor_ms=memory_ms,
        compute_floor_ms=compute_ms,
        ridge_intensity=peak / ceilings.memory_gbps if peak else None,
        peak_gflops=peak,
        peak_dtype=peak_dtype,
        memory_gbps=ceilings.memory_gbps,
    )


# --- one row per benchmark shape --------------------------------------------------------------------


@dataclass(frozen=True)
class SideTime:
    """One side's median time at a shape and the rates it implies."""

    median_ms: float
    gbps: float
    gflops: float | None  # None when the shape's FLOPs are unknown
    fraction_of_floor: float | None  # None without a floor
    faster_than_floor: bool | None  # None without a floor

    @classmethod
    def at(cls, median_ms: float, counts: WorkCounts, floor_ms: float | None) -> SideTime:
        seconds = median_ms * 1e-3
        has_floor = floor_ms is not None
        return cls(
            median_ms=median_ms,
            gbps=counts.bytes / seconds / 1e9,
            gflops=counts.flops / seconds / 1e9 if counts.flops else None,
            fraction_of_floor=fraction_of_floor(median_ms, floor_ms) if has_floor else None,
            faster_than_floor=is_faster_than_floor(median_ms, floor_ms) if has_floor else None,
        )


STORED_SOURCE = "stored"  # a stored row keeps no sources of its counts: they read back as this

STORED_KEYS = ("shape", "dtype", "flops", "bytes", "intensity", "floor_ms", "bound")  # then each side's median


@dataclass(frozen=True)
class RooflineRow:
    """One benchmark shape: its work, its floor on this device (None without ceilings), each side's time."""

    shape: tuple[int, ...]
    dtype: str
    counts: WorkCounts
    floor_ms: float | None = None
    bound: Bound | None = None
    baseline: SideTime | None = None
    candidate: SideTime | None = None

    @property
    def label(self) -> str:
        return "shape " + "x".join(str(d) for d in self.shape) + f" ({self.dtype})"

    def side(self, role: Role) -> SideTime | None:
        return self.baseline if role == "baseline" else self.candidate

    def detail(self) -> dict[str, Any]:
        """Every field, flat (`kernel-agent profile --json`): a side's keys only where it was timed, the floor's
        only with ceilings."""
        counts = self.counts
        out: dict[str, Any] = {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "flops": counts.flops,
            "bytes": counts.bytes,
            "intensity": counts.arithmetic_intensity,
            "flops_source": counts.flops_source,
            "bytes_source": counts.bytes_source,
        }
        if self.floor_ms is not None:
            out.update(floor_ms=self.floor_ms, bound=self.bound)
        for role in ROLES:
            side = self.side(role)
            if side is None:
                continue
            out.update({f"{role}_median_ms": side.median_ms, f"{role}_gbps": side.gbps, f"{role}_gflops": side.gflops})
            if side.fraction_of_floor is not None or side.faster_than_floor is not None:
                out[f"{role}_fraction_of_floor"] = side.fraction_of_floor
                out[f"{role}_faster_than_floor"] = side.faster_than_floor
        return out

    def to_json(self) -> dict[str, Any]:
        """What a verdict stores of the row for the report's chart: the work, the floor and each side's median,
        each only where it has a value."""
        full = self.detail()
        keys = (*STORED_KEYS, *(f"{role}_median_ms" for role in ROLES))
        return {key: full[key] for key in keys if full.get(key) is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RooflineRow:
        """A stored row back, its rates recomputed from the stored medians (the sources were not kept)."""
        flops, nbytes = data.get("flops"), int(data.get("bytes") or 0)
        counts = WorkCounts(flops, nbytes, data.get("intensity"), STORED_SOURCE, STORED_SOURCE)  # type: ignore[arg-type]
        floor_ms = data.get("floor_ms")
        sides = {
            role: SideTime.at(float(data[f"{role}_median_ms"]), counts, floor_ms)
            for role in ROLES
            if positive(data.get(f"{role}_median_ms"))
        }
        return cls(
            tuple(int(d) for d in data.get("shape", ())),
            str(data.get("dtype", "")),
            counts,
            floor_ms,
            data.get("bound"),
            **sides,
        )


def _medians(timing: TimingResult | None, dtype: str) -> dict[tuple[int, ...], ShapeTiming]:
    """The timing's per-shape entries of one dtype, by shape."""
    return {tuple(e.shape): e for e in (timing.per_shape if timing is not None else []) if e.dtype == dtype}


def shape_rows(problem: Problem, timing: TimingResult | None, ceilings: Ceilings | None) -> list[RooflineRow]:
    """One row per benchmark shape (first dtype): counts, floor, and the timing's medians and rates."""
    dtype = problem.dtypes[0]
    per_shape = _medians(timing, dtype)
    rows = []
    for shape in problem.shapes:
        counts = work_counts(problem, shape, dtype)
        floor = roofline(counts, ceilings, dtype) if ceilings is not None else None
        floor_ms = floor.floor_ms if floor is not None else None
        entry = per_shape.get(tuple(shape))
        sides = {
            role: SideTime.at(getattr(entry, f"{role}_median_ms"), counts, floor_ms)
            for role in ROLES
            if entry is not None and positive(getattr(entry, f"{role}_median_ms"))
        }
        rows.append(RooflineRow(tuple(shape), dtype, counts, floor_ms, floor.bound if floor else None, **sides))
    return rows


def without_candidate(rows: list[RooflineRow]) -> list[RooflineRow]:
    """The rows with the baseline's numbers only (an A/A run times the baseline on both sides)."""
    return [dataclasses.replace(row, candidate=None) for row in rows]


def roofline_record(rows: list[RooflineRow], ceilings: Ceilings) -> dict[str, Any]:
    """What a verdict stores for the report's roofline chart: the ceilings and, per shape, work and times."""
    return {
        "device": ceilings.device_name,
        "fingerprint": ceilings.fingerprint,
        "memory_gbps": ceilings.memory_gbps,
        "gflops": dict(ceilings.gflops),
        "shapes": [row.to_json() for row in rows],
    }
