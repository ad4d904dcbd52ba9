"""SQLAlchemy 2.0 typed ORM models: everything a run produced, content-addressed sources.

The schema is owned by the Alembic migrations in `migrations/`; keep them in step.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Index, Integer, UniqueConstraint
from sqlalchemy import String as _String
from sqlalchemy import Text as _Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from kernel_agent.core.text import storable
from kernel_agent.core.timing_result import TimingResult, timing_of

# Candidate origins of rows that measure a stored source rather than propose one: the baseline's A/A run and
# a best candidate's re-timing with every round (optimize --retime-best). One list, so that every filter of
# variants (review queue, export, status counts, best_verified) leaves out the same rows.
BASELINE = "baseline"
RETIME = "retime"
MEASUREMENTS = (BASELINE, RETIME)


class Text(TypeDecorator):
    """TEXT that can always be written: a lone surrogate (from a candidate's exception, an LLM reply,
    a file name decoded with surrogateescape) or a NUL becomes U+FFFD instead of raising in the driver.
    Display cleaning happens where the text enters (kernel_agent.core.text); this is the last guard."""

    impl = _Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        return storable(value) if isinstance(value, str) else value


class String(Text):
    """VARCHAR(n) with the same guard as `Text`, and cut to n characters: PostgreSQL refuses a longer value
    and fails the whole write (an isolation description grew past 200; the verdict JSON keeps it whole)."""

    impl = _String
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        value = super().process_bind_param(value, dialect)
        length = self.impl.length
        if isinstance(value, str) and length and len(value) > length:
            value = value[: length - 1] + "…"
        return value


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class SourceRow(Base):
    """A kernel source stored once, addressed by the sha256 of its text."""

    __tablename__ = "sources"
    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    text: Mapped[str] = mapped_column(Text)


class ProblemRow(Base):
    __tablename__ = "problems"
    __table_args__ = (UniqueConstraint("name", "content_hash"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))
    path: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    reference_hash: Mapped[str] = mapped_column(ForeignKey("sources.hash"))
    baseline_hash: Mapped[str] = mapped_column(ForeignKey("sources.hash"))
    device: Mapped[str] = mapped_column(String(10))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class RunRow(Base):
    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    started_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    status: Mapped[str] = mapped_column(String(20), default="running")  # running, completed, interrupted, failed
    provider: Mapped[str] = mapped_column(String(40))
    model: Mapped[str | None] = mapped_column(String(200), nullable=True)
    options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    note: Mapped[str] = mapped_column(Text, default="")
    # "BASE_URL MODEL" -> propose.endpoint.EndpointRules.to_json(): what each endpoint was learned to accept
    endpoint_rules: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    kernels: Mapped[list[RunKernelRow]] = relationship(back_populates="run", order_by="RunKernelRow.id")


class RunKernelRow(Base):
    """One kernel's progress inside a run on one device (what `--resume` continues): `device` is the one the run
    named for it, auto, cpu or cuda (`optimize --device cpu,cuda` makes a row per listed device; migration 0005)."""

    __tablename__ = "run_kernels"
    __table_args__ = (UniqueConstraint("run_id", "problem_id", "device", name="uq_run_kernels_run_problem_device"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"))
    device: Mapped[str] = mapped_column(String(10), default="auto", server_default="auto")
    status: Mapped[str] = mapped_column(String(30), default="pending")
    reason: Mapped[str] = mapped_column(Text, default="")
    rounds_done: Mapped[int] = mapped_column(Integer, default=0)
    baseline_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    best_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    best_speedup: Mapped[float | None] = mapped_column(Float, nullable=True)
    best_candidate_id: Mapped[int | None] = mapped_column(Integer, nullable=True)  # candidates.id; no FK (cycle)
    duplicates: Mapped[int] = mapped_column(Integer, default=0)
    run: Mapped[RunRow] = relationship(back_populates="kernels")
    problem: Mapped[ProblemRow] = relationship()


class CandidateRow(Base):
    __tablename__ = "candidates"
    __table_args__ = (UniqueConstraint("run_kernel_id", "normalized_hash"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    run_kernel_id: Mapped[int] = mapped_column(ForeignKey("run_kernels.id"))
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"))
    source_hash: Mapped[str | None] = mapped_column(ForeignKey("sources.hash"), nullable=True)
    normalized_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("candidates.id"), nullable=True)
    origin: Mapped[str] = mapped_column(String(40))  # baseline, retime (MEASUREMENTS), search, openai, seed, ...
    round: Mapped[int] = mapped_column(Integer, default=0)
    note: Mapped[str] = mapped_column(Text, default="")
    parse_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    llm_call_id: Mapped[int | None] = mapped_column(ForeignKey("llm_calls.id"), nullable=True)
    diff_baseline: Mapped[str] = mapped_column(Text, default="")
    diff_parent: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    source: Mapped[SourceRow | None] = relationship()
    evaluation: Mapped[EvaluationRow | None] = relationship(back_populates="candidate", uselist=False)


class EvaluationRow(Base):
    """The full verdict of `eval` for one candidate, with its environment fingerprint."""

    __tablename__ = "evaluations"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"), unique=True)
    status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text, default="")
    correct: Mapped[bool] = mapped_column(Boolean, default=False)
    speedup: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    baseline_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    candidate_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    device: Mapped[str] = mapped_column(String(10), default="")
    device_name: Mapped[str] = mapped_column(String(200), default="")
    isolation: Mapped[str] = mapped_column(String(200), default="")
    backend: Mapped[str] = mapped_column(String(20), default="")
    interpreted: Mapped[bool] = mapped_column(Boolean, default=False)
    flags: Mapped[list[Any]] = mapped_column(JSON, default=list)
    verdict: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    environment: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    candidate: Mapped[CandidateRow] = relationship(back_populates="evaluation")

    @property
    def timing(self) -> TimingResult | None:
        """The stored verdict's timing record, typed: where a stored timing becomes a record."""
        return timing_of(self.verdict)


class LLMCallRow(Base):
    __tablename__ = "llm_calls"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"), nullable=True)
    run_kernel_id: Mapped[int | None] = mapped_column(ForeignKey("run_kernels.id"), nullable=True)
    round: Mapped[int] = mapped_column(Integer, default=0)
    prompt_hash: Mapped[str] = mapped_column(String(64), index=True)
    model: Mapped[str] = mapped_column(String(200))
    base_url: Mapped[str] = mapped_column(Text, default="")
    request: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    responses: Mapped[list[Any]] = mapped_column(JSON, default=list)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    cached: Mapped[bool] = mapped_column(Boolean, default=False)
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    reasoning: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)  # one thought per reply, never parsed
    reasoning_tokens: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    notes: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)  # a cut stream, a shrunk prompt, ...
    templates: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)  # template name -> sha256 (0007)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ReviewRow(Base):
    __tablename__ = "reviews"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id"), index=True)
    decision: Mapped[str] = mapped_column(String(20))  # approve, reject
    reviewer: Mapped[str] = mapped_column(String(200), default="")
    note: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class DeviceCeilingRow(Base):
    __tablename__ = "device_ceilings"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(400), unique=True)
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    measured_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ReferencePointRow(Base):
    """A reference point (torch eager, torch.compile) per problem content, device fingerprint and kind: its speedup
    over the baseline, or the one-line reason it has none. Measured once and reused, like the device ceilings."""

    __tablename__ = "reference_points"
    __table_args__ = (UniqueConstraint("problem_hash", "fingerprint", "kind"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    problem_hash: Mapped[str] = mapped_column(String(64))  # problems.content_hash: the reference and the baseline
    fingerprint: Mapped[str] = mapped_column(String(400))  # measure.ceilings.fingerprint_key: device, torch, threads
    kind: Mapped[str] = mapped_column(String(60))  # eager, compile, compile:MODE (evaluate.references.Reference)
    status: Mapped[str] = mapped_column(String(20))
    speedup: Mapped[float | None] = mapped_column(Float, nullable=True)
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # evaluate.references.ReferencePoint
    verdict: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    measured_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class TuningTimeRow(Base):
    """One config of a variant on one shape (DESIGN.md section 14): its time and interval, or why it has none. The
    ground truth selectors are scored from; one row per (problem, variant, device fingerprint, dtype, shape, config,
    stage)."""

    __tablename__ = "tuning_times"
    __table_args__ = (
        UniqueConstraint("problem_hash", "variant_hash", "fingerprint", "dtype", "shape", "config", "stage"),
        Index("ix_tuning_times_variant", "problem_hash", "variant_hash", "fingerprint"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    problem: Mapped[str] = mapped_column(String(200))
    problem_hash: Mapped[str] = mapped_column(String(64))  # problems.content_hash: the reference and the baseline
    variant_hash: Mapped[str] = mapped_column(String(64))  # sources.hash of the tuned variant (its default config)
    fingerprint: Mapped[str] = mapped_column(String(400))  # measure.ceilings.fingerprint_key: device, torch, threads
    dtype: Mapped[str] = mapped_column(String(20))
    shape: Mapped[str] = mapped_column(String(200))  # core.tuning.shape_key
    config: Mapped[str] = mapped_column(String(400))  # core.tuning.config_key
    stage: Mapped[int] = mapped_column(Integer)  # core.tuning.Stage: 1 screen, 2 confirm
    status: Mapped[str] = mapped_column(String(20))  # timed, or the verdict's status
    time_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_low_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_high_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    speedup: Mapped[float | None] = mapped_column(Float, nullable=True)  # over the problem's baseline, same A/B run
    baseline_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    measured_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class E2ERunRow(Base):
    """A package's kernels swapped into a model (`kernel-agent e2e`, DESIGN.md section 17): whether the outputs held,
    the model's forward-pass speedup with its interval, and per op the micro speedup and share of model time."""

    __tablename__ = "e2e_runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    package: Mapped[str] = mapped_column(Text)
    package_name: Mapped[str] = mapped_column(String(200))
    format: Mapped[str] = mapped_column(String(20))
    recipe: Mapped[str] = mapped_column(Text)
    device: Mapped[str] = mapped_column(String(10))
    status: Mapped[str] = mapped_column(String(20))  # timed, mismatch, not_timed
    reason: Mapped[str] = mapped_column(Text, default="")
    speedup: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    run_ids: Mapped[list[Any]] = mapped_column(JSON, default=list)  # the runs the package's certificates name
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
