"""What an A/B timing returns: one typed record, read by the confirmation, the decision, the verdict and every view
of a stored verdict, field by field.

Its JSON (`to_json`, through `core/record_json.py`) is what the verdict stores; reading a stored one back
(`from_json`, once, where a stored verdict is read) gives the same record, and writing it again the same bytes.
A record written by an older version reads back too: what it lacks takes each field's `absent` value (the values
its readers assumed for it), and it writes back exactly as it was stored.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kernel_agent.core.record_json import JsonRecord, meta
from kernel_agent.core.text import clean_nested


@dataclass(frozen=True)
class Summary(JsonRecord):
    """One side's times of record pooled: the median and its neighbours (ms)."""

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


@dataclass(frozen=True, kw_only=True)
class ShapeTiming(JsonRecord):
    """One benchmark (shape, dtype): its speedup, interval, medians and the tails the confirmation reads (the
    interval and tails are None in a record older than them)."""

    shape: tuple[int, ...]
    dtype: str
    speedup: float
    baseline_median_ms: float
    candidate_median_ms: float
    speedup_ci: tuple[float, float] | None = field(default=None, metadata=meta(absent=None))
    baseline_p20_ms: float | None = field(default=None, metadata=meta(absent=None))
    candidate_p80_ms: float | None = field(default=None, metadata=meta(absent=None))


@dataclass(frozen=True, kw_only=True)
class LookRecord(JsonRecord):
    """An early look of the sequential timing (timing/sequential.py `Look`): its interval and what it settled."""

    rounds: int
    speedup: float
    statistical_ci: tuple[float, float]
    ci: tuple[float, float]
    level: float
    futility_high: float
    futility_level: float
    settled: str | None


@dataclass(frozen=True, kw_only=True)
class Stopping(JsonRecord):
    """How the timing was to stop (`fixed rounds` or `sequential`) and what ended it (timing/stopping.py)."""

    rule: str
    settled_early: bool | None = field(default=None, metadata=meta(optional=True))
    min_rounds: int | None = field(default=None, metadata=meta(optional=True))
    ended_by: str = field(default="", metadata=meta(absent=""))
    look: LookRecord | None = field(default=None, metadata=meta(optional=True))


@dataclass(frozen=True, kw_only=True)
class ContentionShare(JsonRecord):
    """What of the timing cores' busy time was neither ours nor the sandboxes' (measure/contention.py)."""

    other: float
    stolen: float
    cores: int


@dataclass(frozen=True, kw_only=True)
class PhaseCost(JsonRecord):
    """One phase of a sandbox's work, measured from outside its processes."""

    name: str
    requests: int
    cpu_ms: float
    wall_ms: float


@dataclass(frozen=True, kw_only=True)
class SandboxAccount(JsonRecord):
    """One side's sandbox accounting as the timing saw it (sandbox/host/accounting.py `Accounting.to_json`)."""

    method: str
    phases: tuple[PhaseCost, ...] = field(default=(), metadata=meta(named="name", absent=()))
    idle_cpu_ms: float = field(default=0.0, metadata=meta(absent=0.0))
    max_threads: int = field(default=0, metadata=meta(absent=0))
    max_processes: int = field(default=0, metadata=meta(absent=0))
    peak_rss_mb: float = field(default=0.0, metadata=meta(absent=0.0))
    peak_tasks: int | None = field(default=None, metadata=meta(absent=None))
    cores: str = field(default="any", metadata=meta(absent="any"))
    huge_pages_kb: int = field(default=0, metadata=meta(absent=0))
    freezer: str = field(default="SIGSTOP", metadata=meta(absent="SIGSTOP"))


@dataclass(frozen=True, kw_only=True)
class Accounts(JsonRecord):
    baseline: SandboxAccount
    candidate: SandboxAccount


@dataclass(frozen=True, kw_only=True)
class SideRatios(JsonRecord):
    """Each side's sandbox CPU over its timed requests' wall time (the CPU guard on FAST reads them)."""

    baseline: float
    candidate: float


@dataclass(frozen=True, kw_only=True)
class MedianCpu(JsonRecord):
    """Each side's sandbox CPU per wall second over its requests at or below the median wall time, on the shape
    where the candidate's stood highest against its allowance (timing/cpu_use.py): what the CPU guard on FAST
    reads, on the same requests the speed's median is made of."""

    shape: tuple[int, ...]
    dtype: str
    baseline: float
    candidate: float


@dataclass(frozen=True, kw_only=True)
class Resolution(JsonRecord):
    """What the timing could resolve: the target half-width, the 95% interval's own half-width, the minimum
    detectable gain at 80% power (`processes.mde`), what ended the timing; and the speed class the decision
    read from it, with its words (timing/speed_class.py)."""

    target: float
    half_width: float = field(metadata=meta(finite=True))
    mde: float = field(metadata=meta(finite=True))
    ended_by: str  # settled, same, resolution, budget or rounds
    budget_s: float
    speed_class: str | None = field(default=None, metadata=meta(key="class", optional=True))
    words: str | None = field(default=None, metadata=meta(optional=True))


@dataclass(frozen=True, kw_only=True)
class HugePages(JsonRecord):
    """Each side's anonymous memory backed by huge pages (kB; None where /proc could not be read)."""

    baseline: int | None
    candidate: int | None


@dataclass(frozen=True, kw_only=True)
class SetAside(JsonRecord):
    """The one-pair reading a second look set aside (rounded as it is said)."""

    speedup: float
    ci: tuple[float, float]


@dataclass(frozen=True, kw_only=True)
class Processes(JsonRecord):
    """Pairs of processes behind a timing: each pair's speedup and the process effect measured over them
    (timing/processes.py), what the extra processes cost to start, the reading a second look set aside; or,
    with one pair where more were asked, why one."""

    pairs: int
    pair_speedups: tuple[float, ...] | None = field(default=None, metadata=meta(optional=True))
    between_sd: float | None = field(default=None, metadata=meta(optional=True))
    process_effect: float | None = field(default=None, metadata=meta(optional=True))
    within_se: float | None = field(default=None, metadata=meta(optional=True))
    within_df: int | None = field(default=None, metadata=meta(optional=True))
    se: float | None = field(default=None, metadata=meta(optional=True))
    df: int | None = field(default=None, metadata=meta(optional=True))
    memory: tuple[HugePages, ...] | None = field(default=None, metadata=meta(optional=True))
    start_s: float | None = field(default=None, metadata=meta(optional=True))
    second_look_of: SetAside | None = field(default=None, metadata=meta(optional=True))
    why_one: str | None = field(default=None, metadata=meta(optional=True))


@dataclass(frozen=True, kw_only=True)
class PairReading(JsonRecord):
    """What a confirmed verdict keeps of each of its two pairs."""

    speedup: float
    speedup_ci: tuple[float, float]
    ci_level: str
    statistical_ci: tuple[float, float]
    rounds: int
    stopping: Stopping | None = field(default=None, metadata=meta(absent=None))
    per_shape: list[ShapeTiming] = field(default_factory=list, metadata=meta(absent=[]))
    accounting: Accounts | None = field(default=None, metadata=meta(absent=None))


@dataclass(frozen=True, kw_only=True)
class TimingResult(JsonRecord):
    speedup: float
    speedup_ci: tuple[float, float]
    ci_level: str = field(metadata=meta(absent="95%"))  # "95%", "99.9% sequential", or the hull of two pairs'
    statistical_ci: tuple[float, float]  # before the between-process term
    process_effect: float
    baseline: Summary
    candidate: Summary
    rounds: int
    max_rounds: int | None = field(metadata=meta(absent=None))
    stopping: Stopping | None = field(metadata=meta(absent=None))
    calls_per_block: list[int]
    calls_per_request: list[int] = field(metadata=meta(absent=[]))
    per_shape: list[ShapeTiming]
    audited_calls: int
    record_floor_ms: list[float] = field(metadata=meta(absent=[]))
    fresh_inputs_every_call: bool = field(default=True, metadata=meta(absent=True))
    timed_inputs: list[str] = field(metadata=meta(absent=[]))
    clock: str
    threads: int
    work_budget_exceeded: str | None = field(metadata=meta(absent=None))
    contention: ContentionShare | None = field(metadata=meta(absent=None))
    accounting: Accounts | None = field(metadata=meta(absent=None))
    pairs: list[PairReading] | None = field(default=None, metadata=meta(optional=True))  # each pair's, when confirmed
    confirmation: str | None = field(default=None, metadata=meta(optional=True))  # why a second pair was timed
    resolution: Resolution | None = field(default=None, metadata=meta(optional=True))
    processes: Processes | None = field(default=None, metadata=meta(optional=True))  # several pairs, or why one
    cpu_per_wall: SideRatios | None = field(default=None, metadata=meta(optional=True))  # over every request
    cpu_at_median: MedianCpu | None = field(default=None, metadata=meta(optional=True))  # what the guard reads

    def pair_reading(self) -> PairReading:
        """What a confirmed verdict keeps of this pair."""
        return PairReading(
            speedup=self.speedup,
            speedup_ci=self.speedup_ci,
            ci_level=self.ci_level,
            statistical_ci=self.statistical_ci,
            rounds=self.rounds,
            stopping=self.stopping,
            per_shape=self.per_shape,
            accounting=self.accounting,
        )

    def summary(self, role: str) -> Summary:
        return self.baseline if role == "baseline" else self.candidate


def stored_timing(stored: Any) -> TimingResult:
    """A stored timing record, its strings `clean`ed first as every stored verdict's are (a row a tampered process
    wrote carries no escapes to whoever reads it); cleaning what the writer cleaned changes nothing."""
    return TimingResult.from_json(clean_nested(copy.deepcopy(stored)))


def timing_of(verdict: dict[str, Any] | None) -> TimingResult | None:
    """The typed timing of a stored verdict's JSON (None where nothing was timed): where a database row becomes
    a record."""
    stored = (verdict or {}).get("timing")
    return stored_timing(stored) if stored is not None else None


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
            speedup_ci=_hull(a.speedup_ci, b.speedup_ci),
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
        pairs=[p.pair_reading() for p in pairs],
        confirmation=reason,
    )


def _hull(a: tuple[float, float] | None, b: tuple[float, float] | None) -> tuple[float, float] | None:
    if a is None or b is None:
        return a or b
    return min(a[0], b[0]), max(a[1], b[1])
