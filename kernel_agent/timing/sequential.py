"""When the A/B timing may stop early: a look after every round from MIN_ROUNDS on.

Most candidates are settled long before the last round: a 2x or a 0.5x is plain after four. The
risk of looking after every round is the classic one: stopping the first time a noisy interval
happens to clear the bar inflates the false-accept rate. Each early look therefore uses its own,
much stricter interval, and the error of all looks together is bounded by their sum (the union
bound, valid whatever the correlation between looks):

- the statistical part is a Student-t interval over the per-round log speedups, two-sided at
  LOOK_LEVEL (99.9%), so every early look may wrongly accept with probability at most 0.05%;
- the between-process term (`stats.PROCESS_EFFECT`) is added to it exactly as at the final look.

With 10 rounds there are at most 6 early looks, so the one-sided false-accept probability is at
most 2.5% (the final 95% look, as with fixed rounds) + 6 x 0.05% = 2.8%. A look stops the timing
when the decision is settled either way:

- faster: the widened interval's low end clears `1 + min_gain`;
- not faster: a one-sided upper bound at FUTILITY_LEVEL (95%), less the between-process term the
  final interval will still carry, cannot clear `1 + min_gain`. Stopping there can only turn a
  verdict into `correct`, never into `faster`, so it costs no false accepts, and it needs no 99.9%:
  its only price is power, a true gain just above the bar ended early with probability at most 5%
  per look. At 99.9% an equal pair never stopped early (10 of 10 rounds over 100 A/A verdicts).

The t interval over so few rounds is deliberately conservative (t = 12.9 at four rounds): an early
stop must be plain, and anything close runs to the last round as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import numpy as np

from kernel_agent.core.timing_result import LookRecord
from kernel_agent.timing.stats import PROCESS_EFFECT, widen

MIN_ROUNDS = 4  # the timed-output audit samples at least this many blocks; t with 3 degrees of freedom
LOOK_LEVEL = 0.999
FUTILITY_LEVEL = 0.95  # one-sided: the upper bound that says a gain past the bar is out of reach
# Two-sided 99.9% quantiles of Student's t by degrees of freedom (no scipy on every machine this runs on).
_T_999 = {
    1: 636.62, 2: 31.599, 3: 12.924, 4: 8.610, 5: 6.869, 6: 5.959, 7: 5.408, 8: 5.041, 9: 4.781, 10: 4.587,
    11: 4.437, 12: 4.318, 13: 4.221, 14: 4.140, 15: 4.073, 16: 4.015, 17: 3.965, 18: 3.922, 19: 3.883, 20: 3.850,
    25: 3.725, 30: 3.646, 40: 3.551, 60: 3.460, 120: 3.373,
}  # fmt: skip
# One-sided 95% quantiles of Student's t by degrees of freedom.
_T_95 = {
    1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812,
    11: 1.796, 12: 1.782, 13: 1.771, 14: 1.761, 15: 1.753, 16: 1.746, 17: 1.740, 18: 1.734, 19: 1.729, 20: 1.725,
    25: 1.708, 30: 1.697, 40: 1.684, 60: 1.671, 120: 1.658,
}  # fmt: skip


class Settled(str, Enum):
    FASTER = "faster"  # the low end clears the bar
    NOT_FASTER = "not faster"  # the high end cannot


@dataclass(frozen=True)
class Look:
    """One early look: the interval it used and whether it settled the decision."""

    rounds: int
    speedup: float
    statistical_ci: tuple[float, float]
    ci: tuple[float, float]
    settled: Settled | None
    futility_high: float = math.inf  # the one-sided FUTILITY_LEVEL upper bound (statistical part only)

    def record(self) -> LookRecord:
        """What the verdict keeps of this look."""
        return LookRecord(
            rounds=self.rounds,
            speedup=self.speedup,
            statistical_ci=self.statistical_ci,
            ci=self.ci,
            level=LOOK_LEVEL,
            futility_high=self.futility_high,
            futility_level=FUTILITY_LEVEL,
            settled=self.settled.value if self.settled else None,
        )


def t_quantile(df: int, table: dict[int, float] = _T_999) -> float:
    """The quantile of t with `df` degrees of freedom from `table` (by default two-sided LOOK_LEVEL); between
    tabled values, the one of the nearest tabled df below (a wider interval)."""
    if df < 1:
        return math.inf
    return table[max(k for k in table if k <= df)]


def round_log_speedups(base_by_shape: list[list[list[float]]], cand_by_shape: list[list[list[float]]]) -> np.ndarray:
    """Per round: the mean over shapes of log(median baseline / median candidate) within that round."""
    rounds = len(base_by_shape[0])
    logs = np.empty(rounds)
    for r in range(rounds):
        logs[r] = np.mean([math.log(np.median(b[r]) / np.median(c[r])) for b, c in zip(base_by_shape, cand_by_shape)])
    return logs


def look(
    speedup: float,
    base_by_shape: list[list[list[float]]],
    cand_by_shape: list[list[list[float]]],
    min_gain: float,
    process_effect: float = PROCESS_EFFECT,
) -> Look:
    """The interval of an early look around the point estimate `speedup`, and whether it settles the decision."""
    logs = round_log_speedups(base_by_shape, cand_by_shape)
    n = len(logs)
    spread = float(np.std(logs, ddof=1)) / math.sqrt(n) if n > 1 else math.inf
    half = t_quantile(n - 1) * spread
    futility_high = speedup * math.exp(t_quantile(n - 1, _T_95) * spread) if math.isfinite(spread) else math.inf
    stat = (speedup * math.exp(-half), speedup * math.exp(half)) if math.isfinite(half) else (0.0, math.inf)
    low, high = widen(speedup, *stat, process_effect) if math.isfinite(half) else (0.0, math.inf)
    bar = 1 + min_gain
    settled = None
    if low > bar:
        settled = Settled.FASTER
    elif futility_high <= bar * (1 + process_effect):
        settled = Settled.NOT_FASTER
    return Look(n, speedup, stat, (low, high), settled, futility_high)
