"""Read and write helpers for review, report and export (kept apart from reads.py).

Why a separate module: review decisions, lineage and export eligibility are
one concern, shared by three commands, and must agree on "the latest decision
wins" and on which candidates may ship.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select

from kernel_agent.core.of_record import NumberOfRecord, Reading, of_record
from kernel_agent.core.timing_result import TimingResult
from kernel_agent.core.verdict import Status
from kernel_agent.db.models import (
    MEASUREMENTS,
    RETIME,
    CandidateRow,
    EvaluationRow,
    ProblemRow,
    ReviewRow,
    RunRow,
    SourceRow,
)
from kernel_agent.db.session import Database, resolve_url

SHIPPABLE = ("faster", "flagged")


@dataclass
class Decision:
    """The latest review of one candidate."""

    decision: str  # approve or reject
    reviewer: str
    note: str
    created_at: datetime


@dataclass
class CandidateRecord:
    """One evaluated candidate with what review, report and export need to know."""

    id: int
    run_id: int
    kernel: str
    problem_id: int
    problem_path: str
    problem_kind: str
    round: int
    origin: str
    parent_id: int | None
    note: str
    status: str
    reason: str
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    baseline_ms: float | None
    candidate_ms: float | None
    device: str
    device_name: str
    isolation: str
    backend: str
    interpreted: bool
    flags: list[str]
    verdict: dict[str, Any]
    environment: dict[str, Any]
    evaluated_at: datetime | None
    source: str | None
    diff_baseline: str
    diff_parent: str
    decision: Decision | None = None
    timing: TimingResult | None = None  # the verdict's timing record, decoded once where the row is read

    @property
    def checks_passed(self) -> tuple[int, int]:
        """(passed, run) over the verdict's correctness cases; skipped cases do not count."""
        checks = [c for c in self.verdict.get("checks", []) if c.get("passed") is not None]
        return sum(1 for c in checks if c.get("passed")), len(checks)

    @property
    def dtypes(self) -> list[str]:
        """The dtypes the verdict checked (the keys of its tolerances)."""
        return sorted(self.verdict.get("tolerances", {}))


@dataclass
class KernelRecord:
    """One kernel of a run: its row and every candidate, oldest first."""

    name: str
    status: str
    reason: str
    rounds_done: int
    baseline_ms: float | None
    best_ms: float | None
    best_speedup: float | None
    best_candidate_id: int | None
    problem_path: str
    problem_kind: str
    reference_source: str
    baseline_source: str
    candidates: list[CandidateRecord] = field(default_factory=list)
    device: str = "auto"  # the device the run named for this kernel (a run with --device cpu,cuda has a row each)

    @property
    def best(self) -> CandidateRecord | None:
        return next((c for c in self.candidates if c.id == self.best_candidate_id), None)

    def number_of(self, c: CandidateRecord) -> NumberOfRecord:
        """The number of record of one of this kernel's candidates (core/of_record.py): its newest evaluated
        re-timing decides for it; the best's wide early look waits for one."""
        retimes = [
            Reading.stored(r.id, r)
            for r in self.candidates
            if r.origin == RETIME and r.parent_id == c.id and r.evaluated_at is not None
        ]
        return of_record(Reading.stored(c.id, c), retimes, best=c.id == self.best_candidate_id)

    def number(self) -> NumberOfRecord | None:
        """The kernel's number of record: its best's (None without a best)."""
        best = self.best
        return self.number_of(best) if best is not None else None


def resolve_run(db: Database, run: str) -> int | None:
    """A run id from `RUN`: a number, or `latest` for the newest run; None when there is no such run."""
    with db.session() as session:
        if run.strip().lower() == "latest":
            return session.scalar(select(RunRow.id).order_by(RunRow.id.desc()).limit(1))
        try:
            run_id = int(run)
        except ValueError:
            return None
        return run_id if session.get(RunRow, run_id) is not None else None


def latest_decisions(db: Database, candidate_ids: list[int] | None = None) -> dict[int, Decision]:
    """The latest decision per candidate (by time, then id): later reviews override earlier ones."""
    with db.session() as session:
        query = select(ReviewRow).order_by(ReviewRow.created_at, ReviewRow.id)
        if candidate_ids is not None:
            query = query.where(ReviewRow.candidate_id.in_(candidate_ids))
        latest: dict[int, Decision] = {}
        for row in session.scalars(query).all():
            latest[row.candidate_id] = Decision(row.decision, row.reviewer, row.note, row.created_at)
        return latest


def add_review(db: Database, candidate_id: int, decision: str, reviewer: str, note: str) -> int:
    with db.session() as session, session.begin():
        row = ReviewRow(candidate_id=candidate_id, decision=decision, reviewer=reviewer, note=note)
        session.add(row)
        session.flush()
        return row.id


def candidate_origin(db: Database, candidate_id: int) -> tuple[str, int | None] | None:
    """(origin, parent id) of a stored candidate, or None when there is no such candidate."""
    with db.session() as session:
        row = session.get(CandidateRow, candidate_id)
        return None if row is None else (row.origin, row.parent_id)


def _record(c: CandidateRow, e: EvaluationRow | None, problem: ProblemRow) -> CandidateRecord:
    return CandidateRecord(
        id=c.id,
        run_id=c.run_id,
        kernel=problem.name,
        problem_id=problem.id,
        problem_path=problem.path,
        problem_kind=problem.kind,
        round=c.round,
        origin=c.origin,
        parent_id=c.parent_id,
        note=c.note,
        status=e.status if e else ("unparseable" if c.parse_error else "pending"),
        reason=e.reason if e else (c.parse_error or ""),
        speedup=e.speedup if e else None,
        ci_low=e.ci_low if e else None,
        ci_high=e.ci_high if e else None,
        baseline_ms=e.baseline_ms if e else None,
        candidate_ms=e.candidate_ms if e else None,
        device=e.device if e else "",
        device_name=e.device_name if e else "",
        isolation=e.isolation if e else "",
        backend=e.backend if e else "",
        interpreted=bool(e.interpreted) if e else False,
        flags=list(e.flags or []) if e else [],
        verdict=dict(e.verdict or {}) if e else {},
        timing=e.timing if e else None,
        environment=dict(e.environment or {}) if e else {},
        evaluated_at=e.created_at if e else None,
        source=c.source.text if c.source else None,
        diff_baseline=c.diff_baseline,
        diff_parent=c.diff_parent,
    )


def run_kernels(db: Database, run_id: int, kernels: list[str] | None = None) -> list[KernelRecord]:
    """Every kernel of a run (only the named ones when given) with all its candidates and their latest decisions."""
    with db.session() as session:
        run = session.get(RunRow, run_id)
        if run is None:
            return []
        records = []
        for k in run.kernels:
            problem = k.problem
            if kernels and problem.name not in kernels:
                continue
            rows = session.execute(
                select(CandidateRow, EvaluationRow)
                .outerjoin(EvaluationRow, EvaluationRow.candidate_id == CandidateRow.id)
                .where(CandidateRow.run_kernel_id == k.id)
                .order_by(CandidateRow.id)
            ).all()
            records.append(
                KernelRecord(
                    name=problem.name,
                    status=k.status,
                    reason=k.reason,
                    rounds_done=k.rounds_done,
                    baseline_ms=k.baseline_ms,
                    best_ms=k.best_ms,
                    best_speedup=k.best_speedup,
                    best_candidate_id=k.best_candidate_id,
                    problem_path=problem.path,
                    problem_kind=problem.kind,
                    reference_source=_text(session, problem.reference_hash),
                    baseline_source=_text(session, problem.baseline_hash),
                    candidates=[_record(c, e, problem) for c, e in rows],
                    device=k.device,
                )
            )
    decisions = latest_decisions(db, [c.id for k in records for c in k.candidates])
    for k in records:
        for c in k.candidates:
            c.decision = decisions.get(c.id)
    return records


def _text(session: Any, digest: str) -> str:
    row = session.get(SourceRow, digest)
    return row.text if row else ""


def lineage(candidates: list[CandidateRecord], candidate_id: int) -> list[CandidateRecord]:
    """The parent chain from the baseline to `candidate_id` (baseline first)."""
    by_id = {c.id: c for c in candidates}
    chain: list[CandidateRecord] = []
    current = by_id.get(candidate_id)
    while current is not None and current not in chain:
        chain.append(current)
        current = by_id.get(current.parent_id) if current.parent_id is not None else None
    return list(reversed(chain))


def reviewable(kernel: KernelRecord) -> list[CandidateRecord]:
    """Accepted (`faster`) and `flagged` candidates of a kernel, best first (measurements are not candidates)."""
    found = [c for c in kernel.candidates if c.status in SHIPPABLE and c.origin not in MEASUREMENTS]
    return sorted(found, key=lambda c: (-(c.speedup or 0.0), c.id))


def approve_command(candidate_id: int, db: Database | None = None) -> str:
    """The exact command that approves a candidate in this database (`--db` only when it is not the default one)."""
    command = f"kernel-agent review approve {candidate_id}"
    if db is not None and db.url != resolve_url(None):
        command += f" --db {shlex.quote(str(db.path) if db.path is not None else db.display_url)}"
    return command


def review_summary(
    candidate_id: int,
    speedup: float | None,
    ci: list[float | None] | None,
    reason: str,
    db: Database | None = None,
    decision: str | None = None,
) -> dict[str, Any]:
    """What every result view says about a flagged candidate: its id, speedup and interval, the flag's reason,
    the command that approves it (a flagged candidate ships only after that) and one sentence with all of it."""
    command = approve_command(candidate_id, db)
    low, high = (list(ci) + [None, None])[:2] if ci else (None, None)
    interval = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    measured = (
        f"candidate {candidate_id} at {speedup:.2f}x{interval}" if speedup is not None else f"candidate {candidate_id}"
    )
    why = f" ({reason})" if reason else ""
    if decision == "approve":
        note = f"{measured} was flagged{why} and is approved: export ships it"
    else:
        note = f"{measured} awaits review{why}; approve it to ship it: {command}"
    return {
        "candidate": candidate_id,
        "speedup": speedup,
        "speedup_ci": [low, high] if interval else None,
        "reason": reason,
        "command": command,
        "decision": decision,
        "note": note,
    }


def awaiting_review(kernel: KernelRecord) -> CandidateRecord | None:
    """The kernel's best flagged candidate that no one rejected, when it beats every accepted (`faster`, not
    rejected) one: the result a human has to look at."""

    def rejected(c: CandidateRecord) -> bool:
        return c.decision is not None and c.decision.decision == "reject"

    live = [c for c in kernel.candidates if c.origin not in MEASUREMENTS and not rejected(c)]
    flagged = [c for c in live if c.status == Status.FLAGGED]
    if not flagged:
        return None
    best = max(flagged, key=lambda c: (c.speedup or 0.0, -c.id))
    accepted = [c.speedup or 0.0 for c in live if c.status == Status.FASTER]
    return None if accepted and max(accepted) >= (best.speedup or 0.0) else best


def kernel_review(kernel: KernelRecord, db: Database | None = None) -> dict[str, Any] | None:
    """`review_summary` of `awaiting_review(kernel)`, or None."""
    c = awaiting_review(kernel)
    if c is None:
        return None
    return review_summary(
        c.id, c.speedup, [c.ci_low, c.ci_high], c.reason, db, c.decision.decision if c.decision else None
    )
