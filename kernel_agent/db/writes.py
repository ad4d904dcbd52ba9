"""Writes and reads of run data, each write in its own transaction.

Killing the process at any moment loses at most the evaluation in flight:
every step is committed before the next one starts.

Several processes may write one database at once (two `optimize` runs, a
cluster's orchestrators): shared rows (content-addressed sources, problems,
a run's kernels) are inserted with INSERT ... ON CONFLICT DO NOTHING and then
read back, so a concurrent writer of the same row never fails or duplicates it,
and every write transaction goes through `Database.write()`.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Table, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from kernel_agent.core.llm_call import LLMCall
from kernel_agent.core.of_record import typical_ms
from kernel_agent.core.text import clean
from kernel_agent.core.verdict import Verdict
from kernel_agent.db.models import (
    BASELINE,
    CandidateRow,
    EvaluationRow,
    LLMCallRow,
    ProblemRow,
    RunKernelRow,
    RunRow,
    SourceRow,
    utcnow,
)
from kernel_agent.db.session import Database


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()  # never raises on a lone surrogate


def normalized_hash(source: str) -> str:
    """Hash of the syntax tree: comments and formatting do not make a new candidate."""
    try:
        return sha256(ast.dump(ast.parse(source)))
    except (SyntaxError, ValueError):
        return sha256(source)


def unified_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    return "".join(
        difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), old_name, new_name)
    )


def insert_if_absent(session: Session, table: Table, values: dict[str, Any], keys: list[str]) -> None:
    """INSERT ... ON CONFLICT (keys) DO NOTHING: safe when another process inserts the same row at once."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        statement = postgresql.insert(table).values(**values).on_conflict_do_nothing(index_elements=keys)
    elif dialect == "sqlite":
        statement = sqlite.insert(table).values(**values).on_conflict_do_nothing(index_elements=keys)
    else:  # another server: check, then insert (the unique constraint still refuses a duplicate)
        exists = session.execute(select(*table.c).where(*(table.c[k] == values[k] for k in keys))).first()
        if exists is not None:
            return
        statement = table.insert().values(**values)
    session.execute(statement)


def put_source(session: Session, text: str) -> str:
    digest = sha256(text)
    if session.get(SourceRow, digest) is None:
        insert_if_absent(session, SourceRow.__table__, {"hash": digest, "text": text}, ["hash"])
    return digest


class Problem(Protocol):
    """What the database keeps of a problem (`problem.load.Problem` is one): named here so that the
    database imports no stage but `core`."""

    name: str
    kind: str
    path: Path
    device: str

    @property
    def reference_source(self) -> str: ...

    @property
    def baseline_source(self) -> str: ...


def problem_hash(problem: Problem) -> str:
    """What a problem's stored rows (and its reference points) are keyed by: its reference and its baseline."""
    return sha256(problem.reference_source + "\0" + problem.baseline_source)


def ensure_problem(db: Database, problem: Problem) -> int:
    reference, baseline = problem.reference_source, problem.baseline_source
    content = problem_hash(problem)
    where = (ProblemRow.name == problem.name, ProblemRow.content_hash == content)
    with db.write() as session:
        problem_id = session.scalar(select(ProblemRow.id).where(*where))
        if problem_id is None:
            values = {
                "name": problem.name,
                "kind": problem.kind,
                "path": str(problem.path),
                "content_hash": content,
                "reference_hash": put_source(session, reference),
                "baseline_hash": put_source(session, baseline),
                "device": problem.device,
                "created_at": utcnow(),
            }
            insert_if_absent(session, ProblemRow.__table__, values, ["name", "content_hash"])
            problem_id = session.scalar(select(ProblemRow.id).where(*where))
        assert problem_id is not None
        return problem_id


def create_run(db: Database, provider: str, model: str | None, options: dict[str, Any]) -> int:
    with db.write() as session:
        run = RunRow(provider=provider, model=model, options=options, status="running")
        session.add(run)
        session.flush()
        return run.id


def add_run_kernel(db: Database, run_id: int, problem_id: int, device: str = "auto") -> int:
    """The run's row for this problem on this device (auto, cpu or cuda, as the run named it), made once."""
    where = (RunKernelRow.run_id == run_id, RunKernelRow.problem_id == problem_id, RunKernelRow.device == device)
    with db.write() as session:
        existing = session.scalar(select(RunKernelRow.id).where(*where))
        if existing is not None:
            return existing
        values = {
            "run_id": run_id,
            "problem_id": problem_id,
            "device": device,
            "status": "pending",
            "reason": "",
            "rounds_done": 0,
            "duplicates": 0,
        }
        insert_if_absent(session, RunKernelRow.__table__, values, ["run_id", "problem_id", "device"])
        row_id = session.scalar(select(RunKernelRow.id).where(*where))
        assert row_id is not None
        return row_id


def update_run_kernel(db: Database, run_kernel_id: int, **fields: Any) -> None:
    with db.write() as session:
        row = session.get(RunKernelRow, run_kernel_id)
        assert row is not None
        for key, value in fields.items():
            setattr(row, key, clean(value, 2000) if key == "reason" and isinstance(value, str) else value)


def count_duplicate(db: Database, run_kernel_id: int) -> None:
    with db.write() as session:
        row = session.get(RunKernelRow, run_kernel_id)
        assert row is not None
        row.duplicates += 1


def run_started_at(db: Database, run_id: int) -> datetime:
    with db.session() as session:
        run = session.get(RunRow, run_id)
        assert run is not None
        return run.started_at


def reopen_run(db: Database, run_id: int) -> None:
    with db.write() as session:
        run = session.get(RunRow, run_id)
        assert run is not None
        run.status, run.finished_at = "running", None


def replace_plan(db: Database, run_id: int, options: dict[str, Any]) -> None:
    """Store the plan a resume changed (an option typed again), so a later resume keeps it."""
    with db.write() as session:
        run = session.get(RunRow, run_id)
        assert run is not None
        run.options = options


def retry_kernels(db: Database, run_id: int, statuses: frozenset[str]) -> int:
    """Set a run's kernels that ended with one of `statuses` back to pending (and the run to running), so a resume
    runs them again. Their stored rows stay: each earlier baseline becomes a measurement (no dedup hash), so the
    new baseline, the same source, can be stored beside it. Returns how many."""
    with db.write() as session:
        kernels = session.scalars(
            select(RunKernelRow).where(RunKernelRow.run_id == run_id, RunKernelRow.status.in_(statuses))
        ).all()
        for kernel in kernels:
            kernel.status, kernel.reason = "pending", ""
            for baseline in session.scalars(
                select(CandidateRow).where(CandidateRow.run_kernel_id == kernel.id, CandidateRow.origin == BASELINE)
            ):
                baseline.normalized_hash = None
        if kernels:
            run = session.get(RunRow, run_id)
            assert run is not None
            run.status, run.finished_at = "running", None
        return len(kernels)


def finish_run(db: Database, run_id: int, status: str, note: str = "") -> None:
    with db.write() as session:
        run = session.get(RunRow, run_id)
        assert run is not None
        run.status = status
        run.finished_at = utcnow()
        if note:
            run.note = note


def find_candidate(db: Database, run_kernel_id: int, source: str) -> CandidateRow | None:
    with db.session() as session:
        return session.scalar(
            select(CandidateRow).where(
                CandidateRow.run_kernel_id == run_kernel_id, CandidateRow.normalized_hash == normalized_hash(source)
            )
        )


def add_candidate(
    db: Database,
    *,
    run_id: int,
    run_kernel_id: int,
    problem_id: int,
    source: str | None,
    baseline_source: str,
    parent_id: int | None,
    parent_source: str | None,
    origin: str,
    round: int,
    note: str = "",
    parse_error: str | None = None,
    llm_call_id: int | None = None,
    variant: bool = True,
) -> int:
    """Store one candidate. `variant` False stores a measurement of a source already stored (a re-timing):
    it gets no normalized hash, so dedup by hash never finds it and the unique (kernel, hash) pair allows it."""
    with db.write() as session:
        candidate = CandidateRow(
            run_id=run_id,
            run_kernel_id=run_kernel_id,
            problem_id=problem_id,
            origin=origin,
            round=round,
            note=clean(note, 2000),
            parse_error=None if parse_error is None else clean(parse_error, 2000),
            llm_call_id=llm_call_id,
            parent_id=parent_id,
        )
        if source is not None:
            candidate.source_hash = put_source(session, source)
            candidate.normalized_hash = normalized_hash(source) if variant else None
            candidate.diff_baseline = unified_diff(baseline_source, source, "baseline/kernel.py", "candidate/kernel.py")
            if parent_source is not None:
                candidate.diff_parent = unified_diff(parent_source, source, "parent/kernel.py", "candidate/kernel.py")
        session.add(candidate)
        session.flush()
        return candidate.id


def add_evaluation(db: Database, candidate_id: int, verdict: Verdict, duration_s: float) -> int:
    data = verdict.to_dict()  # cleans the verdict's text first (flags appended after it was made included)
    timing = verdict.timing
    with db.write() as session:
        row = EvaluationRow(
            candidate_id=candidate_id,
            status=verdict.status,
            reason=verdict.reason,
            correct=verdict.correct,
            speedup=verdict.speedup,
            ci_low=verdict.speedup_ci[0] if verdict.speedup_ci else None,
            ci_high=verdict.speedup_ci[1] if verdict.speedup_ci else None,
            baseline_ms=typical_ms(timing, "baseline"),
            candidate_ms=typical_ms(timing, "candidate"),
            device=verdict.device,
            device_name=verdict.environment.get("device_name", ""),
            isolation=verdict.isolation,
            backend=verdict.backend,
            interpreted=verdict.interpreted,
            flags=list(data["flags"]),
            verdict=data,
            environment=dict(verdict.environment),
            duration_s=duration_s,
        )
        session.add(row)
        session.flush()
        return row.id


def add_llm_call(db: Database, call: LLMCall, run_id: int | None, run_kernel_id: int | None, round: int) -> int:
    data = asdict(call)
    with db.write() as session:
        row = LLMCallRow(
            run_id=run_id,
            run_kernel_id=run_kernel_id,
            round=round,
            prompt_hash=call.prompt_hash,
            model=call.model,
            base_url=call.base_url,
            request=data["request"],
            responses=list(call.response_texts),
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
            latency_s=call.latency_s,
            cost_usd=call.cost_usd,
            error=None if call.error is None else clean(call.error, 2000),
            cached=call.cached,
            attempts=call.attempts,
            reasoning=list(call.reasoning_texts) or None,
            reasoning_tokens=call.reasoning_tokens,
            notes=[clean(note, 400) for note in call.notes] or None,
            templates=dict(call.templates) or None,
        )
        session.add(row)
        if call.endpoint_rules is not None and run_id is not None:
            run = session.get(RunRow, run_id)
            if run is not None:  # a new dict: the JSON column sees the change
                key = f"{call.base_url} {call.model}"
                run.endpoint_rules = {**(run.endpoint_rules or {}), key: call.endpoint_rules}
        session.flush()
        return row.id


def endpoint_rules(db: Database, run_id: int, base_url: str, model: str) -> dict[str, Any] | None:
    """What a run learned its endpoint (base URL, model) accepts, for a resumed run to start from."""
    with db.session() as session:
        run = session.get(RunRow, run_id)
        rules = (run.endpoint_rules or {}) if run is not None else {}
        return rules.get(f"{base_url.rstrip('/')} {model}")


def cached_call(db: Database, prompt_hash: str) -> LLMCall | None:
    """The most recent successful response to exactly this prompt (the response cache)."""
    with db.session() as session:
        row = session.scalar(
            select(LLMCallRow)
            .where(LLMCallRow.prompt_hash == prompt_hash, LLMCallRow.error.is_(None))
            .order_by(LLMCallRow.id.desc())
            .limit(1)
        )
        return None if row is None or not row.responses else row_to_call(row)


def row_to_call(row: LLMCallRow) -> LLMCall:
    return LLMCall(
        prompt_hash=row.prompt_hash,
        model=row.model,
        base_url=row.base_url,
        request=dict(row.request),
        response_texts=list(row.responses),
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        latency_s=row.latency_s,
        cost_usd=row.cost_usd,
        error=row.error,
        cached=row.cached,
        attempts=row.attempts,
        reasoning_texts=list(row.reasoning or []),
        reasoning_tokens=row.reasoning_tokens or 0,
        notes=list(row.notes or []),
    )


def recorded_calls(db: Database, run_id: int, problem_name: str | None = None) -> list[LLMCall]:
    """Every successful LLM call of a run (for one kernel when named), oldest first: what `replay` replays."""
    with db.session() as session:
        query = select(LLMCallRow).where(LLMCallRow.run_id == run_id, LLMCallRow.error.is_(None))
        if problem_name is not None:
            query = query.join(RunKernelRow, RunKernelRow.id == LLMCallRow.run_kernel_id).join(
                ProblemRow, ProblemRow.id == RunKernelRow.problem_id
            )
            query = query.where(ProblemRow.name == problem_name)
        return [row_to_call(r) for r in session.scalars(query.order_by(LLMCallRow.id)).all()]


def stored_ceilings(db: Database, fingerprint: str) -> dict[str, Any] | None:
    """Device ceilings measured earlier on this device fingerprint, if any."""
    from kernel_agent.db.models import DeviceCeilingRow

    with db.session() as session:
        row = session.scalar(select(DeviceCeilingRow).where(DeviceCeilingRow.fingerprint == fingerprint))
        return dict(row.data) if row is not None else None


def store_ceilings(db: Database, fingerprint: str, data: dict[str, Any], replace: bool = False) -> None:
    """Keep the first measurement per fingerprint (concurrent runs agree on one), unless `replace`."""
    from kernel_agent.db.models import DeviceCeilingRow

    with db.write() as session:
        if replace:
            row = session.scalar(select(DeviceCeilingRow).where(DeviceCeilingRow.fingerprint == fingerprint))
            if row is not None:
                row.data, row.measured_at = data, utcnow()
                return
        insert_if_absent(
            session,
            DeviceCeilingRow.__table__,
            {"fingerprint": fingerprint, "data": data, "measured_at": utcnow()},
            ["fingerprint"],
        )
