"""A candidate's number of record: the one speedup, interval and pair of times that every view quotes for it.

Why one function: the best of a search is its luckiest reading, and an early look's 99.9% interval is wide, so a
run times its best again with every round (`optimize --retime-best`, a row of origin `retime`), and that reading
supersedes the early look when it reads `faster` too (DESIGN.md section 7). When each view chose for itself, the
HTML report quoted an early look of 5.16x [1.80, 25.63] that the run had replaced by 1.48x [1.35, 1.61].
A kernel's best whose early look is wider than `WIDE` is not quoted as a number until its re-timing is in: views
say `PENDING` instead. Pure: readings in, a `NumberOfRecord` out; the optimize loop, the database reads, the report,
review and export each turn what they hold into `Reading`s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kernel_agent.core.relative import Relative, missing, over_baseline
from kernel_agent.core.timing_result import TimingResult
from kernel_agent.core.verdict import Status

WIDE = 3.0  # an early look whose interval's upper end is more than this many times its lower end is not quoted
PENDING = "re-timing"  # what a view says in place of a number it does not quote yet
FASTER = Status.FASTER


def typical_ms(timing: TimingResult | None, role: str) -> float | None:
    """One time per side that agrees with the speedup: the geometric mean over benchmark shapes of
    the per-shape medians (their ratio between the two sides of one A/B run is exactly the speedup).
    A pooled median over shapes of different sizes would not be. A timing without per-shape
    entries (a hand-made or very old record) falls back to its overall median."""
    if timing is None:
        return None
    values = [getattr(entry, f"{role}_median_ms") for entry in timing.per_shape]
    if not values:
        values = [timing.summary(role).median_ms]
    if not all(v > 0 for v in values):
        return None
    if len(values) == 1:
        return float(values[0])  # exactly, not through exp(log())
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))


def stopped_early(timing: TimingResult | None) -> bool:
    """Whether a verdict's A/B timing (either pair of a confirmed one) ended before its last round: the
    timing record's `stopping` (timing/stopping.py), else fewer rounds than the most."""
    if timing is None:
        return False
    stops = [pair.stopping for pair in (timing.pairs or [timing])]
    if any(stop is not None for stop in stops):
        return any(stop is not None and bool(stop.settled_early) for stop in stops)
    return timing.max_rounds is not None and timing.rounds < timing.max_rounds


def pairs_of(timing: TimingResult | None) -> int:
    """How many pairs of processes timed a verdict together (1 where one pair did, or nothing was timed)."""
    pairs = timing.processes.pairs if timing is not None and timing.processes is not None else 1
    return pairs if pairs > 0 else 1


def speed_class_of(timing: TimingResult | None) -> str:
    """The timed comparison's speed class ('' for a verdict timed before there were classes)."""
    resolution = timing.resolution if timing is not None else None
    return (resolution.speed_class or "") if resolution is not None else ""


class Stored(Protocol):
    """What a stored evaluation holds (db/models.py EvaluationRow, db/review_reads.py CandidateRecord)."""

    status: str
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    baseline_ms: float | None
    candidate_ms: float | None
    reason: str
    timing: TimingResult | None  # the stored verdict's, decoded where it was read


@dataclass(frozen=True)
class Reading:
    """One evaluation's speedup over the baseline: its point, interval, both times (from the same A/B run, so their
    ratio is the point), and whether an early look of the sequential timing ended it."""

    candidate: int
    status: str
    speedup: float | None
    ci: tuple[float, float] | None = None
    baseline_ms: float | None = None
    candidate_ms: float | None = None
    early: bool = False
    reason: str = ""  # said only where nothing was timed
    pairs: int = 1  # pairs of processes that timed it together (several: the process effect was measured)
    speed_class: str = ""  # FAST, SAME, AMBIGUOUS or SLOW where the timing resolved one (timing/speed_class.py)

    @classmethod
    def timed(
        cls, candidate: int, status: str, speedup: float | None, ci: Any, timing: TimingResult | None, reason: str
    ) -> Reading:
        """A reading from a verdict's values and its timing record (core/verdict.py Verdict)."""
        interval = (float(ci[0]), float(ci[1])) if ci and len(ci) == 2 and None not in ci else None
        return cls(
            candidate,
            str(status),
            speedup,
            interval,
            typical_ms(timing, "baseline"),
            typical_ms(timing, "candidate"),
            stopped_early(timing),
            reason,
            pairs_of(timing),
            speed_class_of(timing),
        )

    @classmethod
    def stored(cls, candidate: int, row: Stored) -> Reading:
        """A reading from a stored evaluation (its columns; the timing record for whether it stopped early)."""
        ci = (row.ci_low, row.ci_high) if row.ci_low is not None and row.ci_high is not None else None
        timing = row.timing
        return cls(
            candidate,
            row.status,
            row.speedup,
            ci,
            row.baseline_ms,
            row.candidate_ms,
            stopped_early(timing),
            row.reason,
            pairs_of(timing),
            speed_class_of(timing),
        )

    @property
    def wide(self) -> bool:
        """An interval too wide to quote: its upper end more than `WIDE` times its lower end."""
        return self.ci is not None and (self.ci[0] <= 0 or self.ci[1] > WIDE * self.ci[0])

    def text(self) -> str:
        """`4.97x [4.38, 5.53], faster`; without a speedup, the status and its reason."""
        if self.speedup is None:
            return f"{self.status}: {self.reason[:200]}" if self.reason else self.status
        interval = f" [{self.ci[0]:.2f}, {self.ci[1]:.2f}]" if self.ci else ""
        return f"{self.speedup:.2f}x{interval}, {self.status}"

    def to_json(self) -> dict[str, Any]:
        return {"candidate": self.candidate, "speedup": self.speedup, "speedup_ci": list(self.ci) if self.ci else None}


@dataclass(frozen=True)
class NumberOfRecord:
    """A candidate (the variant: the source that ships) and whose reading every view quotes for it."""

    variant: Reading  # the candidate's own evaluation: for a best accepted early, its early look
    retimed: Reading | None = None  # its newest re-timing with every round, whatever it read
    best: bool = False  # its kernel's best: the one candidate a run re-times

    @property
    def superseded(self) -> bool:
        """A re-timing read faster too: it, not the variant's own reading, is the number of record."""
        return self.retimed is not None and self.retimed.status == FASTER

    @property
    def withheld(self) -> bool:
        """A best accepted by an early look too wide to quote, not re-timed yet: no number is quoted."""
        v = self.variant
        return self.best and self.retimed is None and v.status == FASTER and v.early and v.wide

    @property
    def quoted(self) -> Reading | None:
        """Whose numbers views quote: the faster re-timing, else the variant's own reading (None: withheld)."""
        if self.superseded:
            return self.retimed
        return None if self.withheld else self.variant

    @property
    def candidate(self) -> int:
        """The candidate whose evaluation gives the number of record (the variant's, while withheld)."""
        return self.retimed.candidate if self.superseded and self.retimed else self.variant.candidate

    @property
    def speedup(self) -> float | None:
        return self.quoted.speedup if self.quoted else None

    @property
    def ci(self) -> tuple[float, float] | None:
        return self.quoted.ci if self.quoted else None

    @property
    def early_look(self) -> Reading | None:
        """The variant's own reading where a view may show it, labelled as the early look: once superseded."""
        return self.variant if self.superseded else None

    @property
    def lower_bound(self) -> float | None:
        """The most the evidence establishes: the number of record, or a withheld early look's interval low end
        (what fast_p counts until the re-timing is in)."""
        if self.withheld and self.variant.ci:
            return self.variant.ci[0]
        return self.speedup

    def cell(self, digits: int = 2) -> str:
        """The speedup as a table cell: `1.48x`, `re-timing`, or `-`."""
        if self.withheld:
            return PENDING
        return f"{self.speedup:.{digits}f}x" if self.speedup is not None else "-"

    def note(self) -> str:
        """One sentence on where the number comes from, when anything but the variant's own full reading."""
        if self.withheld:
            return (
                f"the early look of candidate {self.variant.candidate} is not quoted: its interval's upper end is "
                f"more than {WIDE:g}x its lower end; {PENDING} with every round decides"
            )
        if self.retimed is None:
            return ""
        retimed = self.retimed
        on = f" on {retimed.pairs} pairs of processes" if retimed.pairs > 1 else ""
        said = f" ({retimed.speed_class})" if retimed.speed_class else ""
        head = f"re-timed with all rounds (candidate {retimed.candidate}){on}: {retimed.text()}{said}"
        if self.superseded:
            return f"{head}; the early look read {self.variant.text()}"
        return f"{head}; the early look stands"

    def to_json(self) -> dict[str, Any]:
        """`record_candidate`, `speedup`, `speedup_ci`, `early_look` (labelled; null unless superseded) and
        `pending` (`re-timing` while withheld, else null): the keys each JSON view carries."""
        early = self.early_look
        return {
            "record_candidate": self.candidate,
            "speedup": self.speedup,
            "speedup_ci": list(self.ci) if self.ci else None,
            "early_look": early.to_json() if early else None,
            "pending": PENDING if self.withheld else None,
        }


def of_record(variant: Reading, retimes: Iterable[Reading] = (), best: bool = False) -> NumberOfRecord:
    """The number of record of `variant` given its evaluated re-timings (any order; the newest, by candidate id,
    decides). `best`: the variant is its kernel's best, so a wide early look of it waits for its re-timing."""
    newest = max(retimes, key=lambda r: r.candidate, default=None)
    return NumberOfRecord(variant, newest, best)


def relative(number: NumberOfRecord | None) -> Relative:
    """A kernel's number of record as its speedup over the baseline (core/relative.py: what the eager and
    compile columns divide), or why there is none."""
    if number is None:
        return missing("no best candidate")
    return over_baseline(number.speedup, number.ci, PENDING if number.withheld else "no speedup")
