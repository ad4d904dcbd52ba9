"""A speedup against a reference point (torch eager, torch.compile) from two speedups over the same baseline.

The candidate and the reference are each timed against the baseline in their own A/B run, so
`candidate / reference = (baseline / candidate_time) / (baseline / reference_time)`: the candidate's
speedup over the baseline divided by the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Interval = tuple[float, float]


@dataclass(frozen=True)
class Relative:
    """A speedup against one reference with its interval, or null with the reason there is none."""

    value: float | None
    ci: Interval | None = None
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        if self.value is None or self.ci is None:
            return {"value": None, "reason": self.reason}
        return {"value": self.value, "ci": [self.ci[0], self.ci[1]]}

    def short(self, against: str) -> str:
        """'1.42x eager', '0.05x eager', or '-' without a value."""
        return "-" if self.value is None else f"{self.value:.2f}x {against}"


def missing(reason: str) -> Relative:
    return Relative(None, None, reason)


def over_baseline(speedup: float | None, ci: Any, reason: str = "no speedup") -> Relative:
    """The candidate's own speedup over the baseline, in the same form."""
    if speedup is None or not ci:
        return missing(reason)
    return Relative(float(speedup), (float(ci[0]), float(ci[1])))


def versus(candidate: Relative, reference: Relative) -> Relative:
    """The candidate's speedup over the reference: `candidate / reference`, and the interval

        [candidate_low / reference_high, candidate_high / reference_low].

    On the log scale that is the point's log ratio minus (plus) the sum of the two intervals' half-widths on
    their far sides: interval arithmetic, which holds whenever both intervals hold. It is conservative: if
    both 95% intervals hold, so does this one; and for two independent A/B runs with normal log errors the
    exact 95% half-width is 1.96 * sqrt(s_c^2 + s_r^2), never more than this sum, 1.96 * (s_c + s_r).
    """
    if candidate.value is None or candidate.ci is None:
        return missing(candidate.reason or "the candidate has no speedup")
    if reference.value is None or reference.ci is None:
        return missing(reference.reason or "no reference point")
    (c_low, c_high), (r_low, r_high) = candidate.ci, reference.ci
    if min(reference.value, r_low, r_high) <= 0:
        return missing("the reference point has no positive speedup")
    return Relative(candidate.value / reference.value, (c_low / r_high, c_high / r_low))


REFERENCES = ("eager", "compile")
NOT_MEASURED = "no reference point measured (--no-references, or the candidate was never timed)"


def point_relative(point: dict[str, Any] | None) -> Relative:
    """A stored reference point (`evaluate.references.ReferencePoint.to_json()`) as its speedup over the baseline."""
    if not point:
        return missing(NOT_MEASURED)
    reason = point.get("reason") or f"the reference point is {point.get('status')}"
    return over_baseline(point.get("speedup"), point.get("ci"), f"torch {point.get('kind')}: {reason}")


def speedups_vs(candidate: Relative, points: dict[str, dict[str, Any]]) -> dict[str, Relative]:
    """`speedup_vs`: the candidate against the baseline, torch eager and torch.compile, then any extra
    compile modes that were measured (`compile:MODE`, from `--compile-mode`)."""
    kinds = [*REFERENCES, *sorted(k for k in points if k not in REFERENCES)]
    return {"baseline": candidate, **{kind: versus(candidate, point_relative(points.get(kind))) for kind in kinds}}


def speedup_vs_json(candidate: Relative, points: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {kind: relative.to_json() for kind, relative in speedups_vs(candidate, points).items()}
