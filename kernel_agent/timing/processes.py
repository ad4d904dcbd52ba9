"""The speedup over several pairs of processes: the between-process effect measured, not assumed.

Two processes running the same kernel keep a speed difference for their whole life (where their memory
landed decides cache conflicts), and resampling rounds within one pair cannot see it: one pair stands a
fixed 8% term (`stats.PROCESS_EFFECT`) in for it. Here each side runs in P processes (P pairs of a
baseline and a candidate process), their rounds interleaved, and the interval comes from the pairs:

- each pair's log speedup L_p is the mean over shapes of log(median baseline / median candidate), its
  rounds pooled, exactly as a single pair's point;
- the point is exp(mean L_p), every pair weighing alike;
- the half-width is the larger of two: the pairs' own t interval, t(P - 1) * sd(L_p) / sqrt(P), the pairs
  being the independent units (a process effect and round noise both show in how far their speedups
  scatter); and what round noise alone leaves in the mean, t(R - P) * within_se, from the R rounds' spread
  within the pairs (R - P degrees of freedom).

The first alone has its stated coverage whatever the process effect and the round noise are (L_p normal and
independent across pairs); the second only widens it, for three pairs that happen to agree more closely than
their rounds' noise allows. With P = 3, t is 4.30 at 95%: honest about how little three processes say about
a fourth, and the reason the pairs' own spread must be small for an interval to come out narrow. Round noise
is known from many rounds, so its term takes the rounds' degrees of freedom (with t(P - 1) it held 3% gains
of cpp_softmax whose three pairs agreed to 0.3% at +-3%: AMBIGUOUS). The measured process effect (the
between-pair standard deviation beyond what round noise explains) is stored with every verdict.

The minimum detectable effect (MDE) says what the design could have shown: the smallest true gain that
would have cleared 1 + min_gain with 80% power, given this verdict's standard error and degrees of freedom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernel_agent.core.timing_result import HugePages, Processes
from kernel_agent.timing.sequential import round_log_speedups

POWER = 0.8
# Two-sided 95% (upper 97.5%) and one-sided 80% quantiles of Student's t by degrees of freedom.
_T_975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
    12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000, 120: 1.980,
}  # fmt: skip
_T_80 = {
    1: 1.376, 2: 1.061, 3: 0.978, 4: 0.941, 5: 0.920, 6: 0.906, 7: 0.896, 8: 0.889, 9: 0.883, 10: 0.879,
    12: 0.873, 15: 0.866, 20: 0.860, 30: 0.854, 60: 0.848, 120: 0.845,
}  # fmt: skip
# Two-sided 99.9% (upper 99.95%): the early looks' level (timing/sequential.py LOOK_LEVEL).
_T_9995 = {
    1: 636.62, 2: 31.599, 3: 12.924, 4: 8.610, 5: 6.869, 6: 5.959, 7: 5.408, 8: 5.041, 9: 4.781, 10: 4.587,
    12: 4.318, 15: 4.073, 20: 3.850, 30: 3.646, 60: 3.460, 120: 3.373,
}  # fmt: skip
LEVELS = {"95%": _T_975, "99.9%": _T_9995}


def t_quantile(df: int, table: dict[int, float]) -> float:
    """The tabled quantile at `df`, or at the nearest tabled df below it (a wider interval)."""
    if df < 1:
        return math.inf
    return table[max(k for k in table if k <= df)]


Rounds = list[list[list[float]]]  # shape -> round -> calls (times of record, ms)


@dataclass(frozen=True)
class PairRecords:
    """One pair of processes: each side's times of record, shape -> round -> calls."""

    baseline: Rounds
    candidate: Rounds

    def log_speedup(self) -> float:
        """Mean over shapes of log(median baseline / median candidate), rounds pooled."""
        return float(
            np.mean(
                [
                    math.log(np.median(np.concatenate(b)) / np.median(np.concatenate(c)))
                    for b, c in zip(self.baseline, self.candidate)
                ]
            )
        )

    def round_spread(self) -> float:
        """The standard deviation of the per-round log speedups (0 with a single round)."""
        logs = round_log_speedups(self.baseline, self.candidate)
        return float(np.std(logs, ddof=1)) if len(logs) > 1 else 0.0

    @property
    def rounds(self) -> int:
        return len(self.baseline[0])


@dataclass(frozen=True)
class ProcessEstimate:
    """The speedup over P pairs, its interval at `level`, and what the design could resolve."""

    speedup: float
    ci: tuple[float, float]
    level: str
    se: float  # of the mean log speedup, from whichever term sets the half-width
    df: int  # that term's degrees of freedom
    pair_speedups: tuple[float, ...]
    between_sd: float  # sd of the pairs' log speedups
    process_effect: float  # the part of it round noise does not explain (0 when it explains all)
    within_se: float  # what round noise alone would give the mean
    within_df: int  # the rounds' degrees of freedom behind within_se

    @property
    def half_width(self) -> float:
        """Half the interval's width in log space, as a relative figure (0.03: +-3%)."""
        low, high = self.ci
        return math.expm1(math.log(high / low) / 2) if low > 0 and math.isfinite(high) else math.inf

    def rounds_only(self, level: str = "95%") -> tuple[float, float]:
        """The interval round noise alone would give (no process effect): the `statistical_ci` of several pairs."""
        half = t_quantile(self.within_df, LEVELS[level]) * self.within_se if self.within_se > 0 else 0.0
        return math.exp(math.log(self.speedup) - half), math.exp(math.log(self.speedup) + half)

    def mde(self, min_gain: float) -> float:
        """The smallest true gain (0.05: 5%) that clears 1 + min_gain with 80% power at this design."""
        return mde(self.se, self.df, min_gain)

    def record(self, memory: tuple[HugePages, ...]) -> Processes:
        """What the verdict keeps of this estimate, with each pair's huge-page memory."""
        return Processes(
            pairs=len(self.pair_speedups),
            pair_speedups=tuple(self.pair_speedups),
            between_sd=self.between_sd,
            process_effect=self.process_effect,
            within_se=self.within_se,
            within_df=self.within_df,
            se=self.se,
            df=self.df,
            memory=memory,
        )


def mde(se: float, df: int, min_gain: float) -> float:
    """(1 + min_gain) * exp((t_975 + t_80) * se) - 1: the gain whose interval's low end clears the bar in 80% of
    verdicts of this design (the normal-theory power rule, with t for the few degrees of freedom)."""
    if not math.isfinite(se) or df < 1:
        return math.inf
    return (1 + min_gain) * math.exp((t_quantile(df, _T_975) + t_quantile(df, _T_80)) * se) - 1


def estimate(pairs: list[PairRecords], level: str = "95%") -> ProcessEstimate:
    """The speedup over pairs of processes with its t interval over the pairs (module docstring)."""
    logs = np.asarray([p.log_speedup() for p in pairs])
    count = len(logs)
    center = float(logs.mean())
    between = float(np.std(logs, ddof=1)) if count > 1 else math.inf
    # what round noise alone leaves in each pair's mean, and so in the mean over pairs
    within_var = [p.round_spread() ** 2 / max(1, p.rounds) for p in pairs]
    within_se = math.sqrt(sum(within_var)) / count
    process = math.sqrt(max(0.0, between**2 - float(np.mean(within_var)))) if count > 1 else math.inf
    within_df = sum(p.rounds - 1 for p in pairs)
    table = LEVELS[level]
    over_pairs = t_quantile(count - 1, table) * between / math.sqrt(count) if count > 1 else math.inf
    rounds_only = t_quantile(within_df, table) * within_se if within_se > 0 else 0.0  # as .rounds_only(level)
    if over_pairs >= rounds_only:
        half, se, df = over_pairs, (between / math.sqrt(count) if count > 1 else math.inf), count - 1
    else:
        half, se, df = rounds_only, within_se, within_df
    ci = (math.exp(center - half), math.exp(center + half)) if math.isfinite(half) else (0.0, math.inf)
    return ProcessEstimate(
        speedup=math.exp(center),
        ci=ci,
        level=level,
        se=se,
        df=df,
        pair_speedups=tuple(float(math.exp(v)) for v in logs),
        between_sd=between,
        process_effect=process,
        within_se=within_se,
        within_df=within_df,
    )
