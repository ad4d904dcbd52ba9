"""The four-way speed class beside a passing verdict's status.

`faster` and `correct` say whether a candidate is accepted; they do not say whether a `correct` one was
as fast as its baseline within a few percent or could not be told apart at all. The class does:

- FAST: the interval's low end clears 1 + min_gain (what `faster` means);
- SLOW: its high end is below 1 - min_gain;
- SAME: the whole interval lies within 1 +- resolution: an equivalence result, "same speed within 3%";
- AMBIGUOUS: none of these; the interval straddles, and the verdict says how wide it was and what gain
  its design could have shown (the MDE).

FAST and SLOW are checked before SAME: a precisely measured 2.5% gain is FAST, not SAME.
"""

from __future__ import annotations

from enum import Enum

from kernel_agent.core.timing_result import TimingResult


class SpeedClass(str, Enum):
    FAST = "FAST"
    SLOW = "SLOW"
    SAME = "SAME"
    AMBIGUOUS = "AMBIGUOUS"

    def __str__(self) -> str:
        return self.value


def classify(ci: tuple[float, float] | list[float], min_gain: float, resolution: float) -> SpeedClass:
    low, high = ci
    if low > 1 + min_gain:
        return SpeedClass.FAST
    if high < 1 - min_gain:
        return SpeedClass.SLOW
    if low >= 1 - resolution and high <= 1 + resolution:
        return SpeedClass.SAME
    return SpeedClass.AMBIGUOUS


def describe(speed: SpeedClass, ci: tuple[float, float] | list[float], resolution: float, mde: float | None) -> str:
    """The class in words, for the reason line, `runs show`, the report and the LLM's feedback."""
    low, high = ci
    if speed is SpeedClass.SAME:
        return f"same speed within {resolution:.0%}"
    if speed is SpeedClass.SLOW:
        return f"slower: {1 / high:.2f}-{1 / low:.2f}x the baseline's time" if low > 0 else "slower"
    if speed is SpeedClass.FAST:
        return "faster"
    half = (high / low) ** 0.5 - 1 if low > 0 else float("inf")
    shown = f"; could have shown a {mde:.0%} gain" if mde is not None and mde < 10 else ""
    return f"could not resolve: +-{half:.0%}{shown}"


def label(timing: TimingResult | None) -> str | None:
    """The stored class of a verdict's timing (None for verdicts timed before there were classes)."""
    value = timing.resolution.speed_class if timing is not None and timing.resolution is not None else None
    return value if value in SpeedClass.__members__ else None
