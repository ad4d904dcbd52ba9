"""The compact profile the prompt shows (and `kernel-agent profile` prints): where the baseline, or a
candidate, stands against the roofline per shape, the ceilings, the top operators and a warning when a
time beats a floor."""

from __future__ import annotations

import math
import statistics
from typing import Any

from kernel_agent.core.timing_result import TimingResult
from kernel_agent.measure.ceilings import Ceilings
from kernel_agent.measure.roofline import Role, RooflineRow, positive, shape_rows
from kernel_agent.problem.load import Problem


def _round(value: Any, digits: int = 4) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{digits}g}")
    return value


def _timing_summary(timing: TimingResult | None, role: Role) -> dict[str, Any]:
    """`{role}_median_ms`, `_p20_ms`, `_p80_ms`: the timing's overall summary of that side."""
    summary = timing.summary(role) if timing is not None else None
    if summary is None or not positive(summary.median_ms):
        return {}
    return {
        f"{role}_{key}": _round(getattr(summary, key))
        for key in ("median_ms", "p20_ms", "p80_ms")
        if positive(getattr(summary, key))
    }


def _shape_entry(row: RooflineRow, role: Role) -> dict[str, Any]:
    """One shape's work, floor and (when timed) that side's time and rates, rounded, without empty values."""
    counts = row.counts
    compact: dict[str, Any] = {
        "flops": counts.flops,
        "bytes": counts.bytes,
        "intensity": _round(counts.arithmetic_intensity, 3),
    }
    if row.floor_ms is not None:
        compact.update(floor_ms=_round(row.floor_ms), bound=row.bound)
    side = row.side(role)
    if side is not None:
        compact.update(
            median_ms=_round(side.median_ms), achieved_gbps=_round(side.gbps), achieved_gflops=_round(side.gflops)
        )
        if side.fraction_of_floor is not None:
            compact["fraction_of_floor"] = _round(side.fraction_of_floor, 3)
    return {k: v for k, v in compact.items() if v is not None}


def build_profile(
    problem: Problem,
    timing: TimingResult | None,
    ceilings: Ceilings | None,
    rows: list[RooflineRow] | None = None,
    role: Role = "baseline",
    breakdown: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The compact profile of the baseline (or, role="candidate", of a candidate) that the prompt renders.

    Top-level keys are the ones the prompt summarises: `{role}_median_ms`,
    `{role}_p20_ms`, `{role}_p80_ms` (the timing's overall summary for that side),
    `bound` ("memory", "compute" or "mixed" across shapes) and `fraction_of_floor`
    (geometric mean over shapes, like the speedup). Then one key per benchmark
    shape, "shape 1024x1024 (float32)", holding flops, bytes, intensity,
    floor_ms, bound, median_ms, achieved_gbps, achieved_gflops and
    fraction_of_floor; then `ceilings`, the operator breakdown when one is given
    and, when the kernel beats a floor, `warning`.
    """
    from kernel_agent.measure.op_breakdown import compiled_line, summary_line

    rows = rows if rows is not None else shape_rows(problem, timing, ceilings)
    profile = _timing_summary(timing, role)
    bounds = {row.bound for row in rows if row.bound is not None}
    if bounds:
        profile["bound"] = bounds.pop() if len(bounds) == 1 else "mixed"
    sides = [row.side(role) for row in rows]
    fractions = [s.fraction_of_floor for s in sides if s is not None and positive(s.fraction_of_floor)]
    if fractions and len(fractions) == len(rows):
        profile["fraction_of_floor"] = _round(math.exp(statistics.fmean(math.log(f) for f in fractions)), 3)
    for row in rows:
        profile[row.label] = _shape_entry(row, role)
    if ceilings is not None and role == "baseline":  # shown once per prompt
        profile["ceilings"] = {
            "device": ceilings.device_name,
            "memory_gbps": _round(ceilings.memory_gbps),
            "gflops": {k: _round(v) for k, v in ceilings.gflops.items()},
        }
    operators = summary_line(breakdown)
    if operators:
        profile["top operators by self time"] = operators
    compiled = compiled_line(breakdown)
    if compiled:
        profile["compiled Triton kernels"] = compiled
    fast = [row.label for row in rows if (side := row.side(role)) is not None and side.faster_than_floor]
    if fast:
        who = "the baseline" if role == "baseline" else "this kernel"
        profile["warning"] = (
            f"{who} beats the roofline floor at {', '.join(fast)}: the declared flops/bytes or the ceilings are off"
        )
    return profile
