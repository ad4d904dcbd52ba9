"""Read-side queries for the CLI and reports: runs, kernels, candidates."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from kernel_agent.core import fast_p
from kernel_agent.core.of_record import NumberOfRecord, Reading, of_record, relative
from kernel_agent.core.relative import speedup_vs_json
from kernel_agent.core.verdict import Status
from kernel_agent.db.models import (
    BASELINE,
    MEASUREMENTS,
    RETIME,
    CandidateRow,
    EvaluationRow,
    LLMCallRow,
    ProblemRow,
    RunKernelRow,
    RunRow,
)
from kernel_agent.db.references import points_seen_by
from kernel_agent.db.review_reads import KernelRecord, kernel_review, latest_decisions, run_kernels
from kernel_agent.db.session import Database

VERIFIED = (Status.FASTER.value, Status.CORRECT.value)  # what fast_p counts; a flagged candidate waits for a human


def list_runs(db: Database) -> list[dict[str, Any]]:
    with db.session() as session:
        runs = session.scalars(select(RunRow).order_by(RunRow.id.desc())).all()
        return [
            {
                "run_id": r.id,
                "started": r.started_at.isoformat(timespec="seconds"),
                "status": r.status,
                "provider": r.provider,
                "kernels": [k.problem.name for k in r.kernels],
                "devices": [k.device for k in r.kernels],  # each kernel's device (auto, cpu or cuda), in order
            }
            for r in runs
        ]


def run_detail(db: Database, run_id: int) -> dict[str, Any] | None:
    # Each kernel's number of record and waiting review, from its candidates as review and the report read them.
    records = {(k.name, k.device): k for k in run_kernels(db, run_id)}
    with db.session() as session:
        run = session.get(RunRow, run_id)
        if run is None:
            return None
        kernels = []
        for k in run.kernels:
            statuses = Counter(
                session.scalars(
                    select(EvaluationRow.status)
                    .join(CandidateRow)
                    .where(CandidateRow.run_kernel_id == k.id, CandidateRow.origin.not_in(MEASUREMENTS))
                ).all()
            )
            unparseable = session.scalar(
                select(func.count())
                .select_from(CandidateRow)
                .where(CandidateRow.run_kernel_id == k.id, CandidateRow.parse_error.is_not(None))
            )
            if unparseable:
                statuses["unparseable"] = unparseable
            record = records[(k.problem.name, k.device)]
            number = record.number()
            references = kernel_references(db, session, k)
            kernels.append(
                {
                    "name": k.problem.name,
                    "device": k.device,
                    "status": k.status,
                    "reason": k.reason,
                    "rounds": k.rounds_done,
                    **times_of_record(number, k.baseline_ms),
                    "best_candidate": k.best_candidate_id,
                    **number_json(number),
                    "statuses": dict(statuses),
                    "references": references,
                    "speedup_vs": speedup_vs_json(relative(number), references),
                    "best_verified_speedup": best_verified(record, number),
                    "review": kernel_review(record, db),
                }
            )
        tokens = session.execute(
            select(
                func.coalesce(func.sum(LLMCallRow.prompt_tokens), 0),
                func.coalesce(func.sum(LLMCallRow.completion_tokens), 0),
                func.coalesce(func.sum(LLMCallRow.cost_usd), 0.0),
                func.count(LLMCallRow.id),
                func.coalesce(func.sum(LLMCallRow.reasoning_tokens), 0),
            ).where(LLMCallRow.run_id == run_id)
        ).one()
        wins = sum(k["statuses"].get(Status.FASTER.value, 0) for k in kernels)
        return {
            "run_id": run.id,
            "started": run.started_at.isoformat(timespec="seconds"),
            "finished": run.finished_at.isoformat(timespec="seconds") if run.finished_at else None,
            "status": run.status,
            "provider": run.provider,
            "model": run.model,
            "options": run.options,
            "note": run.note,
            "kernels": kernels,
            "metrics": run_metrics(kernels).to_json(),
            "llm": {
                "calls": tokens[3],
                "prompt_tokens": tokens[0],
                "completion_tokens": tokens[1],
                "reasoning_tokens": tokens[4],  # part of completion_tokens
                "cost_usd": tokens[2],
                **per_win(tokens[0] + tokens[1], tokens[2], wins),
            },
        }


def number_json(number: NumberOfRecord | None) -> dict[str, Any]:
    """`speedup`, `speedup_ci`, `record_candidate`, `early_look` and `pending` of a kernel's number of record."""
    if number is None:
        return {"speedup": None, "speedup_ci": None, "record_candidate": None, "early_look": None, "pending": None}
    return number.to_json()


def times_of_record(number: NumberOfRecord | None, baseline_ms: float | None) -> dict[str, float | None]:
    """`baseline_ms` and `best_ms` from the number of record's own A/B run (their ratio is its speedup); without
    one (no best, or withheld), the baseline's own time and no best time."""
    quoted = number.quoted if number is not None else None
    if quoted is None or quoted.candidate_ms is None:
        return {"baseline_ms": baseline_ms, "best_ms": None}
    return {"baseline_ms": quoted.baseline_ms or baseline_ms, "best_ms": quoted.candidate_ms}


def per_win(tokens: int, cost_usd: float, wins: int) -> dict[str, Any]:
    """What one verified win (a candidate verified and timed `faster`) cost the run in LLM dollars and tokens;
    None per win while there is none."""
    return {
        "verified_wins": wins,
        "usd_per_win": cost_usd / wins if wins else None,
        "tokens_per_win": tokens / wins if wins else None,
    }


def list_candidates(db: Database, run_id: int | None = None, kernel: str | None = None) -> list[dict[str, Any]]:
    with db.session() as session:
        query = (
            select(CandidateRow, EvaluationRow, ProblemRow.name)
            .outerjoin(EvaluationRow, EvaluationRow.candidate_id == CandidateRow.id)
            .join(ProblemRow, ProblemRow.id == CandidateRow.problem_id)
        )
        if run_id is not None:
            query = query.where(CandidateRow.run_id == run_id)
        if kernel is not None:
            query = query.where(ProblemRow.name == kernel)
        rows = session.execute(query.order_by(CandidateRow.id)).all()
        numbers = numbers_of(session, [(c, e) for c, e, _ in rows])
        found = [candidate_summary(c, e, name, numbers.get(c.id)) for c, e, name in rows]
    decisions = latest_decisions(db, [c["id"] for c in found])
    for c in found:  # the latest human decision, as review, the review page and export read it
        d = decisions.get(c["id"])
        c["review"] = (
            None
            if d is None
            else {
                "decision": d.decision,
                "reviewer": d.reviewer,
                "note": d.note,
                "at": d.created_at.isoformat(timespec="seconds"),
            }
        )
    return found


def numbers_of(session: Session, rows: list[tuple[CandidateRow, EvaluationRow | None]]) -> dict[int, NumberOfRecord]:
    """The number of record of each evaluated candidate in `rows`, from the re-timings among them (a re-timing
    shares its parent's run and kernel, so any filter of rows by those keeps both) and each kernel's best."""
    kernels = {c.run_kernel_id for c, _ in rows}
    bests = set(session.scalars(select(RunKernelRow.best_candidate_id).where(RunKernelRow.id.in_(kernels))).all())
    retimes: dict[int, list[Reading]] = {}
    for c, e in rows:
        if c.origin == RETIME and c.parent_id is not None and e is not None:
            retimes.setdefault(c.parent_id, []).append(Reading.stored(c.id, e))
    return {
        c.id: of_record(Reading.stored(c.id, e), retimes.get(c.id, []), best=c.id in bests)
        for c, e in rows
        if e is not None
    }


def candidate_summary(
    c: CandidateRow, e: EvaluationRow | None, kernel: str, number: NumberOfRecord | None = None
) -> dict[str, Any]:
    """One candidate; its speedup, interval and time are its number of record (the best's faster re-timing, the
    early look labelled beside it), else its own evaluation's."""
    quoted = number.quoted if number is not None else None
    return {
        "id": c.id,
        "run_id": c.run_id,
        "kernel": kernel,
        "round": c.round,
        "origin": c.origin,
        "parent_id": c.parent_id,
        "note": c.note,
        "status": e.status if e else ("unparseable" if c.parse_error else "pending"),
        "reason": e.reason if e else (c.parse_error or ""),
        **number_json(number),
        "candidate_ms": quoted.candidate_ms if quoted else None,
        "source_hash": c.source_hash,
    }


def candidate_detail(db: Database, candidate_id: int) -> dict[str, Any] | None:
    with db.session() as session:
        candidate = session.get(CandidateRow, candidate_id)
        if candidate is None:
            return None
        evaluation = candidate.evaluation
        kernel = session.get(ProblemRow, candidate.problem_id)
        retimes = session.execute(
            select(CandidateRow, EvaluationRow)
            .join(EvaluationRow, EvaluationRow.candidate_id == CandidateRow.id)
            .where(CandidateRow.origin == RETIME, CandidateRow.parent_id == candidate_id)
        ).all()
        number = numbers_of(session, [(candidate, evaluation), *((c, e) for c, e in retimes)]).get(candidate_id)
        data = candidate_summary(candidate, evaluation, kernel.name if kernel else "?", number)
        data.update(
            {
                "source": candidate.source.text if candidate.source else None,
                "diff_baseline": candidate.diff_baseline,
                "diff_parent": candidate.diff_parent,
                "verdict": evaluation.verdict if evaluation else None,
                "llm_call_id": candidate.llm_call_id,
                "reasoning": reasoning_of(session, candidate),
            }
        )
        return data


def reasoning_of(session: Session, candidate: CandidateRow) -> str | None:
    """The thought behind a candidate: its LLM call's reasoning for the reply that held its source (or its
    reason), None when the call kept none."""
    call = session.get(LLMCallRow, candidate.llm_call_id) if candidate.llm_call_id is not None else None
    thoughts = list(call.reasoning or []) if call is not None else []
    if not any(thoughts):
        return None
    replies = list(call.responses or [])
    source = candidate.source.text if candidate.source else None
    for index, reply in enumerate(replies):
        if index < len(thoughts) and source is not None and source.strip() in reply:
            return thoughts[index]
    return thoughts[0] if len(thoughts) == 1 or source is None else None


def kernel_references(db: Database, session: Session, kernel: RunKernelRow) -> dict[str, dict[str, Any]]:
    """The reference points of a run's kernel, on the device its baseline was timed on (none before it was)."""
    environment = session.scalar(
        select(EvaluationRow.environment)
        .join(CandidateRow)
        .where(CandidateRow.run_kernel_id == kernel.id, CandidateRow.origin == BASELINE)
        .order_by(CandidateRow.id.desc())  # a retried kernel's newest baseline
        .limit(1)
    )
    if not environment:
        return {}
    return points_seen_by(db, kernel.problem.content_hash, environment)


def best_verified(kernel: KernelRecord, number: NumberOfRecord | None) -> float | None:
    """What fast_p counts for a kernel: its number of record when its best was accepted (a withheld early look
    at its interval's low end, the most it establishes), else the best point speedup among its verified
    candidates (`correct`: a kernel with no accepted candidate; measurements are not candidates)."""
    if number is not None and number.variant.status == Status.FASTER.value:
        return number.lower_bound
    found = [
        c.speedup
        for c in kernel.candidates
        if c.origin not in MEASUREMENTS and c.status in VERIFIED and c.speedup is not None
    ]
    return max(found, default=None)


def run_metrics(kernels: list[dict[str, Any]]) -> fast_p.RunMetrics:
    """fast_p and the geometric mean over a run's kernels (`run_detail`'s entries); a kernel on a device that was
    not there (status no_device) was never attempted and is not counted."""
    outcomes = [
        fast_p.outcome(
            k["name"],
            k["best_verified_speedup"],
            {kind: (k["references"].get(kind) or {}).get("speedup") for kind in ("eager", "compile")},
        )
        for k in kernels
        if k["status"] != "no_device"
    ]
    return fast_p.run_metrics(outcomes)
