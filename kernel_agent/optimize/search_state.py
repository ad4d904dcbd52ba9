"""One kernel's search, without storage: attempts, parents (the beam), the history a prompt shows,
the patience counter, the stop reasons and the outcome.

Pure: no database, no executor, no clock. The loop feeds it verdicts as they arrive and asks it what to
propose from and when to stop; the recorder fills it from the database after a crash, so a resumed kernel
asks its provider the same question it asked the first time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernel_agent.core.config import Choice
from kernel_agent.core.of_record import (
    PENDING,
    NumberOfRecord,
    Reading,
    of_record,
    pairs_of,
    relative,
    stopped_early,
    typical_ms,
)
from kernel_agent.core.relative import Relative, speedups_vs
from kernel_agent.core.verdict import Status, Verdict
from kernel_agent.optimize.config import SearchConfig
from kernel_agent.propose.base import Attempt

UNPARSEABLE = "unparseable"  # an attempt whose reply held no candidate (not a verdict status)


class KernelStatus(Choice):
    """How a kernel's loop ended (stored in run_kernels.status)."""

    IMPROVED = "improved"  # a candidate was verified faster than the baseline
    NEEDS_REVIEW = "needs_review"  # the best candidate is flagged: a human decides
    NO_GAIN = "no_gain"  # no candidate was verifiably faster than the baseline
    NEEDS_GPU = "needs_gpu"  # the baseline verified under the Triton interpreter: timing, and so a search, needs a GPU
    BASELINE_FAILED = "baseline_failed"  # the baseline itself does not verify against the reference
    TOO_LARGE = "too_large"  # refused before anything ran: the problem cannot fit this machine's memory budget
    PROVIDER_FAILED = "provider_failed"  # a round's requests all failed and none proposed a candidate
    NO_DEVICE = "no_device"  # the device the run named for this kernel is not here (or the problem cannot run there)
    BUDGET_REACHED = "budget_reached"  # resumable
    INTERRUPTED = "interrupted"  # resumable
    ERROR = "error"  # the kernel's loop itself failed (a harness or provider bug, an I/O error): resumable


PAST_THE_FLOOR = 1.1  # a best's fraction of the roofline floor above this is no reason to stop (the floor is off)


class RunStatus(Choice):
    """Where a whole run stands (stored in runs.status)."""

    RUNNING = "running"
    COMPLETED = "completed"
    STOPPED = "stopped"  # some kernel can be resumed (interrupted, budget reached, error)
    INTERRUPTED = "interrupted"  # Ctrl-C
    FAILED = "failed"  # every kernel's provider failed: nothing was searched


# A kernel that ended with one of these is done; a resume returns its stored result.
TERMINAL = frozenset(
    {
        KernelStatus.IMPROVED,
        KernelStatus.NO_GAIN,
        KernelStatus.NEEDS_REVIEW,
        KernelStatus.NEEDS_GPU,
        KernelStatus.BASELINE_FAILED,
        KernelStatus.TOO_LARGE,
        KernelStatus.PROVIDER_FAILED,
        KernelStatus.NO_DEVICE,
    }
)


@dataclass(frozen=True)
class Candidate:
    """A stored candidate waiting for its verdict (proposed this round, or in flight when the run was killed)."""

    id: int
    source: str
    note: str
    round: int


@dataclass
class KernelResult:
    name: str
    status: KernelStatus
    baseline_ms: float | None = None
    best_ms: float | None = None
    speedup: float | None = None
    speedup_ci: list[float] | None = None
    best_candidate: int | None = None
    reason: str = ""
    evaluated: int = 0  # verdicts reached by this invocation
    accepted: int = 0
    # The best flagged candidate when it beats every accepted one: it waits for a human (review_reads.review_summary).
    review: dict[str, Any] | None = None
    references: dict[str, dict[str, Any]] = field(default_factory=dict)  # eager, compile -> ReferencePoint JSON
    record_candidate: int | None = None  # whose verdict gives speedup and times: the best, or its re-timing
    device: str = "auto"  # the device the run named for this kernel: auto, cpu or cuda
    number: NumberOfRecord | None = None  # the best's number of record (core/of_record.py): the speedup's source

    def speedup_vs(self) -> dict[str, Relative]:
        """The best's speedup against the baseline, torch eager and torch.compile (measure.relative)."""
        return speedups_vs(relative(self.number), self.references)

    def cell(self) -> str:
        """The speedup as a table cell: `1.48x`, `re-timing` (a wide early look not re-timed yet), or `-`."""
        return self.number.cell() if self.number is not None else "-"

    def pending(self) -> str:
        """`re-timing` while the best's wide early look waits for its re-timing (its speedup is None), else ''."""
        return PENDING if self.number is not None and self.number.withheld else ""

    def to_dict(self) -> dict[str, Any]:
        number = self.number.to_json() if self.number is not None else {}
        return {
            "name": self.name,
            "device": self.device,
            "status": str(self.status),
            "baseline_ms": self.baseline_ms,
            "best_ms": self.best_ms,
            "speedup": self.speedup,
            "speedup_ci": self.speedup_ci,
            "best_candidate": self.best_candidate,
            "record_candidate": self.record_candidate,
            "early_look": number.get("early_look"),  # the best's own reading, once a re-timing superseded it
            "pending": number.get("pending"),  # "re-timing" while a wide early look is withheld: speedup is null
            "reason": self.reason,
            "review": self.review,
            "references": self.references,
            "speedup_vs": {kind: relative.to_json() for kind, relative in self.speedup_vs().items()},
        }


@dataclass
class SearchState:
    name: str
    baseline_source: str
    config: SearchConfig
    attempts: dict[int, Attempt] = field(
        default_factory=dict
    )  # candidate id -> evaluated attempt (or unparseable reply)
    accepted: dict[int, Verdict] = field(default_factory=dict)  # verdicts `faster`: the parents come from these
    flagged: dict[int, Verdict] = field(
        default_factory=dict
    )  # measured faster but flagged: wait for review, never parents
    baseline_id: int | None = None
    baseline: Verdict | None = None
    rounds_done: int = 0
    stale_rounds: int = 0  # rounds in a row without a better best (counted from this invocation's start)
    queued: set[int] = field(default_factory=set)  # candidates handed out for evaluation and not yet remembered
    new_verdicts: int = 0  # reached by this invocation (restored ones are not counted)
    new_accepted: int = 0
    best_before: float = 1.0  # the best speedup when the current round began
    # best candidate id -> (its re-timing's candidate id, verdict; None while in flight or after a kill)
    retimes: dict[int, tuple[int, Verdict | None]] = field(default_factory=dict)
    retime_note: str = ""  # why the best was not re-timed (a budget, a stop)

    # ---- what the provider sees ---------------------------------------------------------------
    @property
    def parents(self) -> list[Attempt]:
        """The beam: the best accepted variants, fastest first (ties: the older one)."""
        accepted = [a for a in self.attempts.values() if a.status == Status.FASTER and a.speedup]
        return sorted(accepted, key=lambda a: (-(a.speedup or 0.0), a.candidate_id or 0))[: self.config.beam]

    def history_before(self, round_index: int) -> list[Attempt]:
        """Earlier rounds' attempts in storage order: the same prompt on a resume as the first time."""
        return [a for _, a in sorted(self.attempts.items()) if a.round < round_index]

    def parent(self) -> tuple[int | None, str]:
        """What a new candidate derives from: the best so far, else the baseline."""
        parents = self.parents
        return (parents[0].candidate_id, parents[0].source) if parents else (self.baseline_id, self.baseline_source)

    def best_speedup(self) -> float:
        parents = self.parents
        return (parents[0].speedup or 0.0) if parents else 1.0

    # ---- what happened -------------------------------------------------------------------------
    def remember(self, candidate: Candidate, verdict: Verdict, count: bool = True) -> None:
        """A verdict; `count` is False for verdicts restored from an earlier invocation."""
        self.queued.discard(candidate.id)
        self.attempts[candidate.id] = Attempt(
            candidate.id,
            candidate.source,
            verdict.status,
            verdict.reason,
            verdict.speedup,
            candidate.note,
            candidate.round,
        )
        if verdict.status == Status.FASTER:
            self.accepted[candidate.id] = verdict
        elif verdict.status == Status.FLAGGED and verdict.speedup is not None:
            self.flagged[candidate.id] = verdict
        if count:
            self.new_verdicts += 1
            self.new_accepted += int(verdict.status == Status.FASTER)

    def remember_unparseable(self, candidate_id: int, note: str, reason: str, round_index: int) -> None:
        self.attempts[candidate_id] = Attempt(candidate_id, "", UNPARSEABLE, reason, None, note, round_index)

    def seen_unparseable(self, round_index: int, note: str, reason: str | None) -> bool:
        """Whether this round's reply without a candidate was already recorded (before a restart)."""
        return any(
            a.status == UNPARSEABLE and a.round == round_index and a.note == note and a.reason == reason
            for a in self.attempts.values()
        )

    def resumable(self, candidate_id: int, stored_round: int, round_index: int) -> bool:
        """A stored candidate proposed again in its own round and never evaluated: it was in flight
        when the run was killed."""
        fresh = (
            candidate_id not in self.attempts and candidate_id not in self.queued and candidate_id != self.baseline_id
        )
        return fresh and stored_round == round_index

    def queue(self, candidate: Candidate) -> Candidate:
        self.queued.add(candidate.id)
        return candidate

    # ---- when to stop --------------------------------------------------------------------------
    def rounds_left(self) -> range:
        return range(self.rounds_done + 1, self.config.proposal_rounds + 1)

    def begin_round(self) -> None:
        self.best_before = self.best_speedup()

    def end_round(self, round_index: int) -> bool:
        """Count the round; True when patience is spent (this many rounds in a row found nothing better)."""
        self.rounds_done = round_index
        self.stale_rounds = 0 if self.best_speedup() > self.best_before else self.stale_rounds + 1
        return self.stale_rounds >= self.config.patience

    def near_floor(self, fraction_of_floor: object) -> str:
        """A reason to stop when the best already runs close to the machine's floor (little left to find). A best
        well past the floor (ceilings measured while the machine was busy put the floor too high: 27.8 was seen)
        says the floor is wrong, not that nothing is left: the search goes on."""
        stop = self.config.roofline_stop
        if not isinstance(fraction_of_floor, (int, float)) or fraction_of_floor > PAST_THE_FLOOR:
            return ""
        if stop > 0 and fraction_of_floor >= stop:
            return (
                f"stopped early: the best runs at {fraction_of_floor:.2f} "
                f"of the roofline floor (--roofline-stop {stop:g})"
            )
        return ""

    def outcome(self) -> tuple[KernelStatus, str]:
        """How a kernel that ran out of rounds (or patience, or proposals) ended."""
        if self.parents:
            return KernelStatus.IMPROVED, ""
        if self.flagged:
            return KernelStatus.NEEDS_REVIEW, ""  # the result's review says which candidate and how to approve it
        return KernelStatus.NO_GAIN, "no candidate was verifiably faster than the baseline"

    # ---- re-timing the best -------------------------------------------------------------------
    def retime_due(self, several: bool = False) -> Attempt | None:
        """The best accepted candidate, when no re-timing of it is stored and an early look accepted it, or
        (`several`: the re-timing would get several pairs of processes) it was timed on one pair."""
        parents = self.parents
        if not self.config.retime_best or not parents or parents[0].candidate_id is None:
            return None
        best = parents[0]
        verdict = self.accepted.get(best.candidate_id)
        done = self.retimes.get(best.candidate_id, (0, None))[1] is not None
        if verdict is None or done:
            return None
        return best if stopped_early(verdict.timing) or (several and pairs_of(verdict.timing) < 2) else None

    def remember_retime(self, best_id: int, candidate_id: int, verdict: Verdict | None) -> None:
        """A re-timing row of `best_id` (stored or restored): a measurement, never an attempt or a parent."""
        self.retimes[best_id] = (candidate_id, verdict)

    def of_record(self, best_id: int) -> NumberOfRecord:
        """The best's number of record (core/of_record.py): its re-timing when that read `faster` too, else
        its own early look, which is withheld while too wide to quote and not yet re-timed."""
        verdict = self.accepted.get(best_id)
        own = reading(best_id, verdict) if verdict is not None else Reading(best_id, Status.FASTER.value, None)
        candidate_id, retimed = self.retimes.get(best_id, (0, None))
        return of_record(own, [reading(candidate_id, retimed)] if retimed is not None else [], best=True)

    # ---- the result ----------------------------------------------------------------------------
    def best_flagged(self) -> tuple[int, Verdict] | None:
        """The fastest flagged candidate (ties: the older one), when it beats every accepted one."""
        flagged = max(self.flagged.items(), key=lambda item: (item[1].speedup or 0.0, -item[0]), default=None)
        if flagged is None or (self.parents and (flagged[1].speedup or 0.0) <= self.best_speedup()):
            return None
        return flagged

    def result(
        self, status: KernelStatus, reason: str, review_of: Callable[[int, Verdict], dict[str, Any]]
    ) -> KernelResult:
        """The kernel's result; `review_of` describes a flagged best for a human (it reads the database)."""
        result = KernelResult(self.name, status, reason=reason, evaluated=self.new_verdicts, accepted=self.new_accepted)
        if self.baseline is not None and self.baseline.timing:
            result.baseline_ms = typical_ms(self.baseline.timing, "baseline")
        parents = self.parents
        if parents and parents[0].candidate_id is not None:
            result.best_candidate = parents[0].candidate_id
            result.number = self.of_record(result.best_candidate)
            # why no re-timing happened (a budget, a stop) unless a re-timing is in, or the early look waits for one
            note = result.number.note() or (self.retime_note if result.number.retimed is None else "")
            if result.number.withheld and not self.config.retime_best:
                note += "; this run does not re-time its best (--no-retime-best)"
            _times_from(result, result.number)
            if note and note not in result.reason:  # a resumed, finished kernel's stored reason holds it already
                result.reason = "; ".join(part for part in (result.reason, note) if part)
        flagged = self.best_flagged()
        if flagged is not None:
            candidate_id, verdict = flagged
            result.review = review_of(candidate_id, verdict)
            if not parents:  # nothing accepted: the flagged best is the result, marked as waiting for review
                result.best_candidate = candidate_id
                result.number = of_record(reading(candidate_id, verdict))
                _times_from(result, result.number)
            if result.review["note"] not in result.reason:
                result.reason = "; ".join(part for part in (result.reason, result.review["note"]) if part)
        return result


def reading(candidate_id: int, verdict: Verdict) -> Reading:
    """A verdict as the reading the number of record is chosen from."""
    return Reading.timed(
        candidate_id, verdict.status, verdict.speedup, verdict.speedup_ci, verdict.timing, verdict.reason
    )


def _times_from(result: KernelResult, number: NumberOfRecord) -> None:
    """The speedup, interval and both times of the number of record (one A/B run: their ratio is its speedup);
    none while it is withheld, and the baseline's own time stays."""
    quoted = number.quoted
    result.record_candidate = number.candidate
    result.speedup, result.speedup_ci = number.speedup, list(number.ci) if number.ci else None
    result.best_ms = quoted.candidate_ms if quoted else None
    if quoted is not None and quoted.baseline_ms is not None:
        result.baseline_ms = quoted.baseline_ms
