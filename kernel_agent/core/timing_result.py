"""What an A/B timing returns: one typed record, read by the confirmation, the decision and the verdict.

It used to be a 22-key dict, read and rebuilt by each of them. The verdict, the database and the CLI keep
reading its JSON (`to_json`), which is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np


@dataclass
class Summary:
    median_ms: float
    p20_ms: float
    p80_ms: float
    mean_ms: float
    samples: int

    @classmethod
    def of(cls, samples: list[float]) -> Summary:
        data = np.asarray(samples, dtype=float)
        return cls(
            float(np.median(data)),
            float(np.percentile(data, 20)),
            float(np.percentile(data, 80)),
            float(data.mean()),
            int(data.size),
        )


def geometric_mean(values) -> float:
    """exp(mean(log(values))): speedups and efficiencies combine by ratio, not by difference."""
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=float)))))


@dataclass(frozen=True)
class ShapeTiming:
    """One benchmark (shape, dtype): its speedup, interval, medians and the tails the confirmation reads."""

    shape: tuple[int, ...]
    dtype: str
    speedup: float
    speedup_ci: tuple[float, float]
    baseline_median_ms: float
    candidate_median_ms: float
    baseline_p20_ms: float
    candidate_p80_ms: float

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "speedup": self.speedup,
            "baseline_median_ms": self.baseline_median_ms,
            "candidate_median_ms": self.candidate_median_ms,
            "speedup_ci": list(self.speedup_ci),
            "baseline_p20_ms": self.baseline_p20_ms,
            "candidate_p80_ms": self.candidate_p80_ms,
        }


@dataclass(frozen=True)
class Resolution:
    """What the timing could resolve (issue 36): the target half-width, the 95% interval's own half-width, the
    minimum detectable gain at 80% power (`processes.mde`), and what ended the timing."""

    target: float
    half_width: float
    mde: float
    ended_by: str  # settled, same, resolution, budget or rounds
    budget_s: float

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "half_width": _finite(self.half_width),
            "mde": _finite(self.mde),
            "ended_by": self.ended_by,
            "budget_s": self.budget_s,
        }


def _finite(value: float) -> float | None:
    return value if value == value and abs(value) != float("inf") else None


@dataclass(frozen=True)
class TimingResult:
    speedup: float
    speedup_ci: tuple[float, float]
    ci_level: str  # "95%", "99.9% sequential", or the hull of two pairs'
    statistical_ci: tuple[float, float]  # before the between-process term
    process_effect: float
    baseline: Summary
    candidate: Summary
    rounds: int
    max_rounds: int
    stopping: dict[str, Any]
    calls_per_block: list[int]
    calls_per_request: list[int]
    per_shape: list[ShapeTiming]
    audited_calls: int
    record_floor_ms: list[float]
    timed_inputs: list[str]
    clock: str
    threads: int
    work_budget_exceeded: str | None
    contention: dict[str, Any] | None
    accounting: dict[str, Any]
    pairs: list[dict[str, Any]] = field(default_factory=list)  # each pair's own numbers, when confirmed
    confirmation: str | None = None  # why a second pair was timed
    resolution: dict[str, Any] = field(default_factory=dict)  # Resolution.to_json(), the class added by decide
    processes: dict[str, Any] | None = None  # several pairs: each pair's speedup and the measured process effect
    cpu_per_wall: dict[str, float] = field(default_factory=dict)  # each side's CPU over its timed wall time

    def to_json(self) -> dict[str, Any]:
        record = {
            "speedup": self.speedup,
            "speedup_ci": list(self.speedup_ci),
            "ci_level": self.ci_level,
            "statistical_ci": list(self.statistical_ci),
            "process_effect": self.process_effect,
            "baseline": vars(self.baseline),
            "candidate": vars(self.candidate),
            "rounds": self.rounds,
            "max_rounds": self.max_rounds,
            "stopping": self.stopping,
            "calls_per_block": self.calls_per_block,
            "calls_per_request": self.calls_per_request,
            "per_shape": [s.to_json() for s in self.per_shape],
            "audited_calls": self.audited_calls,
            "record_floor_ms": self.record_floor_ms,
            "fresh_inputs_every_call": True,
            "timed_inputs": self.timed_inputs,
            "clock": self.clock,
            "threads": self.threads,
            "work_budget_exceeded": self.work_budget_exceeded,
            "contention": self.contention,
            "accounting": self.accounting,
        }
        if self.confirmation is not None:
            record |= {"pairs": self.pairs, "confirmation": self.confirmation}
        if self.resolution:
            record["resolution"] = dict(self.resolution)
        if self.processes is not None:
            record["processes"] = self.processes
        if self.cpu_per_wall:
            record["cpu_per_wall"] = dict(self.cpu_per_wall)
        return record

    def pair_summary(self) -> dict[str, Any]:
        """What a confirmed verdict keeps of each pair."""
        whole = self.to_json()
        keys = ("speedup", "speedup_ci", "ci_level", "statistical_ci", "rounds", "stopping", "per_shape", "accounting")
        return {k: whole[k] for k in keys}


def combined(first: TimingResult, second: TimingResult, reason: str) -> TimingResult:
    """The timing of record over two pairs: the second's record, with the point, the interval and the
    per-shape medians taken over both (geometric means, so each shape's ratio still gives the point),
    and each pair's own numbers kept under `pairs`."""
    pairs = (first, second)
    per_shape = [
        replace(
            b,
            speedup=geometric_mean([a.baseline_median_ms, b.baseline_median_ms])
            / geometric_mean([a.candidate_median_ms, b.candidate_median_ms]),
            baseline_median_ms=geometric_mean([a.baseline_median_ms, b.baseline_median_ms]),
            candidate_median_ms=geometric_mean([a.candidate_median_ms, b.candidate_median_ms]),
            speedup_ci=(min(a.speedup_ci[0], b.speedup_ci[0]), max(a.speedup_ci[1], b.speedup_ci[1])),
        )
        for a, b in zip(first.per_shape, second.per_shape)
    ]
    return replace(
        second,
        speedup=geometric_mean([p.speedup for p in pairs]),
        speedup_ci=(min(p.speedup_ci[0] for p in pairs), max(p.speedup_ci[1] for p in pairs)),
        ci_level="hull of two process pairs' " + " and ".join(p.ci_level for p in pairs),
        per_shape=per_shape or second.per_shape,
        rounds=sum(p.rounds for p in pairs),
        pairs=[p.pair_summary() for p in pairs],
        confirmation=reason,
    )
