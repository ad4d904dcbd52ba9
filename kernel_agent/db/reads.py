"""Read-side queries for the CLI and reports: runs, kernels, candidates."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

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
from kernel_agent.db.review_reads import kernel_review, run_kernels
from kernel_agent.db.session import Database
from kernel_agent.measure import fast_p
from kernel_agent.measure.relative import over_baseline, speedup_vs_json

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
            record, evaluation = of_record(session, k)
            ci = [evaluation.ci_low, evaluation.ci_high] if evaluation and evaluation.ci_low is not None else None
            references = kernel_references(db, session, k)
            kernels.append(
                {
                    "name": k.problem.name,
                    "device": k.device,
                    "status": k.status,
                    "reason": k.reason,
                    "rounds": k.rounds_done,
                    "baseline_ms": k.baseline_ms,
                    "best_ms": k.best_ms,
                    "speedup": k.best_speedup,
                    "speedup_ci": ci,
                    "best_candidate": k.best_candidate_id,
                    "record_candidate": record,
                    "statuses": dict(statuses),
                    "references": references,
                    "speedup_vs": speedup_vs_json(over_baseline(k.best_speedup, ci, "no best candidate"), references),
                    "best_verified_speedup": best_verified(session, k, record, evaluation),
                }
            )
        tokens = session.execute(
            select(
                func.coalesce(func.sum(LLMCallRow.prompt_tokens), 0),
                func.coalesce(func.sum(LLMCallRow.completion_tokens), 0),
                func.coalesce(func.sum(LLMCallRow.cost_usd), 0.0),
                func.count(LLMCallRow.id),
            ).where(LLMCallRow.run_id == run_id)
        ).one()
        detail = {
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
                "cost_usd": tokens[2],
            },
        }
    # A flagged candidate that beats every accepted one, with its latest review decision (read now, not at run time).
    reviews = {(k.name, k.device): kernel_review(k, db) for k in run_kernels(db, run_id)}
    for kernel in kernels:
        kernel["review"] = reviews.get((kernel["name"], kernel["device"]))
    return detail


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
        return [candidate_summary(c, e, name) for c, e, name in rows]


def candidate_summary(c: CandidateRow, e: EvaluationRow | None, kernel: str) -> dict[str, Any]:
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
        "speedup": e.speedup if e else None,
        "speedup_ci": [e.ci_low, e.ci_high] if e and e.ci_low is not None else None,
        "candidate_ms": e.candidate_ms if e else None,
        "source_hash": c.source_hash,
    }


def candidate_detail(db: Database, candidate_id: int) -> dict[str, Any] | None:
    with db.session() as session:
        candidate = session.get(CandidateRow, candidate_id)
        if candidate is None:
            return None
        evaluation = candidate.evaluation
        kernel = session.get(ProblemRow, candidate.problem_id)
        data = candidate_summary(candidate, evaluation, kernel.name if kernel else "?")
        data.update(
            {
                "source": candidate.source.text if candidate.source else None,
                "diff_baseline": candidate.diff_baseline,
                "diff_parent": candidate.diff_parent,
                "verdict": evaluation.verdict if evaluation else None,
                "llm_call_id": candidate.llm_call_id,
            }
        )
        return data


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


def of_record(session: Session, kernel: RunKernelRow) -> tuple[int | None, EvaluationRow | None]:
    """The candidate and evaluation behind a kernel's number of record: its best's newest re-timing when that
    read `faster` too (as optimize/search_state.py `of_record` chose), else the best's own evaluation."""
    if kernel.best_candidate_id is None:
        return None, None
    retimed = session.execute(
        select(CandidateRow.id, EvaluationRow)
        .join(EvaluationRow, EvaluationRow.candidate_id == CandidateRow.id)
        .where(
            CandidateRow.run_kernel_id == kernel.id,
            CandidateRow.origin == RETIME,
            CandidateRow.parent_id == kernel.best_candidate_id,
            EvaluationRow.status == Status.FASTER.value,
        )
        .order_by(CandidateRow.id.desc())
        .limit(1)
    ).first()
    if retimed is not None:
        return retimed[0], retimed[1]
    best = session.get(CandidateRow, kernel.best_candidate_id)
    return kernel.best_candidate_id, best.evaluation if best is not None else None


def best_verified(
    session: Session, kernel: RunKernelRow, record_id: int | None, record: EvaluationRow | None
) -> float | None:
    """The best point speedup among a kernel's verified candidates (measurements, the baseline's A/A run and a
    re-timing, are not candidates), with the best's early look replaced by its number of record (`of_record`)
    when a re-timing read faster too: fast_p then counts what the run's table shows, not the winner's curse of an
    early stop."""
    retimed = record is not None and record_id != kernel.best_candidate_id
    query = (
        select(func.max(EvaluationRow.speedup))
        .join(CandidateRow)
        .where(
            CandidateRow.run_kernel_id == kernel.id,
            CandidateRow.origin.not_in(MEASUREMENTS),
            EvaluationRow.status.in_(VERIFIED),
        )
    )
    if retimed:
        query = query.where(CandidateRow.id != kernel.best_candidate_id)
    found = [v for v in (session.scalar(query), record.speedup if retimed else None) if v is not None]
    return max(found) if found else None


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
