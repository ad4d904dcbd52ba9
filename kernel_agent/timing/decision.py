"""The one place a timed verdict's status is decided, for `eval`, `optimize` and `export` alike.

Everything the decision needs arrives as values (the speedup estimate, the flags the timing
raised, the roofline rows of this device), so the same candidate on the same machine gets
the same status whichever command evaluated it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernel_agent.core.timing_result import TimingResult
from kernel_agent.core.verdict import Status
from kernel_agent.measure.roofline import RooflineRow
from kernel_agent.timing.speed_class import SpeedClass, classify, describe

DEFAULT_RESOLUTION = 0.03  # a record without a target (hand-made, or timed before there were targets)
CPU_GUARD_SLACK = 1.03  # honest single-threaded sides read 0.9-1.0 CPU per wall second, alike


@dataclass(frozen=True)
class Decision:
    status: Status
    reason: str
    flags: tuple[str, ...]
    speed: SpeedClass | None = None  # the four-way class (None when flagged: a human decides)
    speed_words: str = ""  # the class in words: "same speed within 3%", "could not resolve: +-9%"


def _ratios(estimate: TimingResult) -> tuple[float, float, str]:
    """The candidate's and the baseline's CPU per wall second the guard judges, and where they were read: over
    the requests at or below each shape's median time (the speed's own requests), or over every request for a
    record timed before that was kept."""
    at_median = estimate.cpu_at_median
    if at_median is not None:
        where = f" (requests at or below the median time, shape {list(at_median.shape)} {at_median.dtype})"
        return at_median.candidate, at_median.baseline, where
    ratios = estimate.cpu_per_wall
    return (ratios.candidate, ratios.baseline, "") if ratios is not None else (0.0, 0.0, "")


def cpu_guard(estimate: TimingResult) -> str | None:
    """Why a FAST must not stand: the candidate's sandbox used more CPU per wall second of its timed calls than
    the baseline's did and than its thread budget gives (work on a core it should not have had: b61_within_slack
    read FAST once on a machine without a cpuset). Read on the requests the speed's median is made of, so idle
    requests the median leaves out cannot dilute it. None when it did not, when the record has no ratios, and
    when no core beyond the budget was within reach: a cpuset held the sandbox to its budget's cores, or the
    budget was every core (`cores` "any"). There the ratio can pass the budget only by CPU after the reply,
    before the freeze: an honest two-thread OpenMP kernel's spinning threads read 2.10 against a budget of 2 in
    the demo."""
    cand, base, where = _ratios(estimate)
    if not cand or not base:
        return None
    cores = estimate.accounting.candidate.cores if estimate.accounting is not None else ""
    if cores == "any" or cores.startswith("cpuset"):
        return None
    allowed = max(base, float(estimate.threads or 1)) * CPU_GUARD_SLACK
    if cand <= allowed:
        return None
    return (
        f"its sandbox used {cand:.2f} s of CPU per second of its timed calls{where} against the baseline's "
        f"{base:.2f} (thread budget {estimate.threads}): the gain may be CPU it should not have had"
    )


def floor_flags(rows: list[RooflineRow]) -> list[str]:
    """A candidate measured faster than the roofline floor of a shape needs a human (THREATS.md row 46)."""
    for row in rows:
        side = row.candidate
        if side is not None and side.faster_than_floor and row.floor_ms is not None:
            return [
                f"measured {side.median_ms:.4g} ms on shape {list(row.shape)}, faster than the roofline floor "
                f"{row.floor_ms:.4g} ms of this device: needs human review"
            ]
    return []


def decide(
    estimate: TimingResult,
    flags: list[str],
    min_gain: float,
    sanity_speedup: float,
    roofline_rows: list[RooflineRow],
) -> Decision:
    """faster, correct or flagged, from one A/B estimate.

    Flagged: anything a human must look at (the timing's own flags, a speedup above the sanity
    bound, a time under the roofline floor). Faster: the interval's low end clears 1 + min_gain."""
    speedup, (low, high) = estimate.speedup, estimate.speedup_ci
    raised = list(flags)
    if speedup > sanity_speedup:
        raised.append(f"speedup {speedup:.1f}x exceeds the sanity bound {sanity_speedup:g}x: needs human review")
    raised += floor_flags(roofline_rows)
    if raised:
        return Decision(Status.FLAGGED, "; ".join(raised), tuple(raised))
    res = estimate.resolution
    resolution = float(res.target) if res is not None else DEFAULT_RESOLUTION
    mde = res.mde if res is not None and math.isfinite(res.mde) else None
    speed = classify((low, high), min_gain, resolution)
    guarded = cpu_guard(estimate) if speed is SpeedClass.FAST else None
    if speed is SpeedClass.FAST and guarded is None:
        return Decision(Status.FASTER, "", (), speed, describe(speed, (low, high), resolution, mde))
    if guarded is not None:
        speed = SpeedClass.AMBIGUOUS
        words = f"not accepted: {guarded}"
    else:
        words = describe(speed, (low, high), resolution, mde)
    reason = (
        f"correct but not faster: speedup {speedup:.3f}x, {estimate.ci_level} interval "
        f"[{low:.3f}, {high:.3f}] does not clear {1 + min_gain:.2f}"
        if guarded is None
        else f"correct but not faster: speedup {speedup:.3f}x, {estimate.ci_level} interval [{low:.3f}, {high:.3f}]"
    )
    return Decision(Status.CORRECT, f"{reason}; {speed}: {words}", (), speed, words)
