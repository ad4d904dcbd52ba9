"""The one place a timed verdict's status is decided, for `eval`, `optimize` and `export` alike.

Everything the decision needs arrives as values (the speedup estimate, the flags the timing
raised, the roofline rows of this device), so the same candidate on the same machine gets
the same status whichever command evaluated it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernel_agent.core.verdict import Status
from kernel_agent.measure.timing_result import TimingResult


@dataclass(frozen=True)
class Decision:
    status: Status
    reason: str
    flags: tuple[str, ...]


def floor_flags(rows: list[dict[str, Any]]) -> list[str]:
    """A candidate measured faster than the roofline floor of a shape needs a human (THREATS.md row 46)."""
    flags = []
    for row in rows:
        if row.get("candidate_faster_than_floor"):
            flags.append(
                f"measured {row['candidate_median_ms']:.4g} ms on shape {row['shape']}, faster than the roofline floor "
                f"{row['floor_ms']:.4g} ms of this device: needs human review"
            )
            break
    return flags


def decide(
    estimate: TimingResult,
    flags: list[str],
    min_gain: float,
    sanity_speedup: float,
    roofline_rows: list[dict[str, Any]],
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
    if low > 1 + min_gain:
        return Decision(Status.FASTER, "", ())
    reason = (
        f"correct but not faster: speedup {speedup:.3f}x, {estimate.ci_level} interval "
        f"[{low:.3f}, {high:.3f}] does not clear {1 + min_gain:.2f}"
    )
    return Decision(Status.CORRECT, reason, ())
