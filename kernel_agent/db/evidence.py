"""A candidate's verdict certificate from what the database holds (core/certificate.py).

Why here: export writes the certificate into a package and the report shows the same evidence, and both read it
from the stored rows (the problem's content hash, the verdict of the number of record, the reference points, the
LLM call that proposed it, its review). The shipped files' digests are the exporter's to add.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from kernel_agent.core.certificate import (
    Against,
    Certificate,
    Checks,
    Device,
    Origin,
    Review,
    ShapeSpeedup,
    VerdictPart,
)
from kernel_agent.core.of_record import NumberOfRecord
from kernel_agent.core.relative import REFERENCES, Relative, missing, speedups_vs
from kernel_agent.core.timing_result import TimingResult
from kernel_agent.db.models import CandidateRow, LLMCallRow, ProblemRow, RunRow
from kernel_agent.db.review_reads import CandidateRecord, KernelRecord
from kernel_agent.db.session import Database
from kernel_agent.db.writes import sha256

CASE = re.compile(r"shape=\[([^\]]*)\] dtype=(\S+) inputs=(\S+)")
NO_TEMPLATES = "the LLM call did not record its templates' hashes (a call recorded before they were kept)"


def against_torch(db: Database, c: CandidateRecord, number: NumberOfRecord) -> dict[str, Relative]:
    """The number of record against torch eager and torch.compile on the device it was timed on (the stored
    reference points of its problem content and device fingerprint), each with its interval or the reason there
    is none."""
    from kernel_agent.core.of_record import relative
    from kernel_agent.db.references import points_seen_by

    with db.session() as session:
        problem = session.get(ProblemRow, c.problem_id)
        digest = problem.content_hash if problem is not None else ""
    points = points_seen_by(db, digest, c.environment) if digest and c.environment and not c.interpreted else {}
    own = missing("verified under the Triton interpreter: never timed") if c.interpreted else relative(number)
    found = speedups_vs(own, points)
    return {kind: found[kind] for kind in REFERENCES}


def _shape(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def checks_of(verdict: dict[str, Any], timing: TimingResult | None) -> Checks:
    """What the checks covered, from the verdict's own case labels (`shape=[3, 17] dtype=float32 inputs=normal`)."""
    cases = [c for c in verdict.get("checks", []) if isinstance(c, dict)]
    counted: Counter[str] = Counter()
    shapes: list[list[int]] = []
    dtypes: list[str] = []
    distributions: list[str] = []
    for case in cases:
        found = CASE.search(str(case.get("case", "")))
        if not found or case.get("passed") is None:
            continue
        shape = _shape(found.group(1))
        counted[f"{shape} {found.group(2)}"] += 1
        for value, seen in ((shape, shapes), (found.group(2), dtypes), (found.group(3), distributions)):
            if value not in seen:
                seen.append(value)
    bench = [list(e.shape) for e in timing.per_shape] if timing is not None else []
    return Checks(
        passed=sum(1 for c in cases if c.get("passed")),
        total=sum(1 for c in cases if c.get("passed") is not None),
        shapes=shapes,
        benchmark_shapes=bench,
        dtypes=dtypes,
        distributions=distributions,
        cases_per_shape=dict(counted),
        tolerances=dict(verdict.get("tolerances") or {}),
    )


def verdict_part(record: CandidateRecord, number: NumberOfRecord, vs: dict[str, Relative]) -> VerdictPart:
    """The number of record's verdict: status, point, interval, and each benchmark shape's own reading."""
    timing = record.timing
    shapes = [
        ShapeSpeedup(
            shape=list(e.shape),
            dtype=e.dtype,
            speedup=float(e.speedup),
            ci=list(e.speedup_ci) if e.speedup_ci else None,
            baseline_ms=e.baseline_median_ms,
            candidate_ms=e.candidate_median_ms,
        )
        for e in (timing.per_shape if timing is not None else [])
    ]
    return VerdictPart(
        status=record.status,
        reason=record.reason,
        speedup=number.speedup,
        ci=list(number.ci) if number.ci else None,
        ci_level=timing.ci_level if timing is not None else "95%",
        rounds=timing.rounds if timing is not None else None,
        record_candidate=number.candidate,
        pending="re-timing" if number.withheld else "",
        per_shape=shapes if number.quoted is not None else [],
        against={k: Against(r.value, list(r.ci) if r.ci else None, r.reason) for k, r in vs.items()},
    )


def device_of(c: CandidateRecord) -> Device:
    env = c.environment
    return Device(
        type=c.device,
        name=c.device_name or str(env.get("device_name", "")),
        driver=env.get("driver"),
        clock_mhz=env.get("clock_mhz"),
        threads=env.get("threads"),
        platform=env.get("platform"),
    )


def origin_of(db: Database, c: CandidateRecord) -> Origin:
    """The provider and, where an LLM proposed the candidate, the call's model, endpoint and hashes."""
    with db.session() as session:
        row = session.get(CandidateRow, c.id)
        run = session.get(RunRow, c.run_id)
        call = session.get(LLMCallRow, row.llm_call_id) if row is not None and row.llm_call_id else None
        templates = dict(call.templates) if call is not None and call.templates else None
        return Origin(
            provider=run.provider if run is not None else "",
            origin=c.origin,
            model=call.model if call is not None else (run.model if run is not None else None),
            base_url=call.base_url if call is not None else None,
            prompt_sha256=call.prompt_hash if call is not None else None,
            templates=templates,
            templates_note="" if templates or call is None else NO_TEMPLATES,
        )


def certificate(db: Database, kernel: KernelRecord, c: CandidateRecord, vs: dict[str, Relative]) -> Certificate:
    """The certificate of candidate `c` of `kernel` (its number of record, checks, device, review, origin), without
    the shipped files' digests, which the exporter adds."""
    number = kernel.number_of(c)
    record = next((r for r in kernel.candidates if r.id == number.candidate), c)
    with db.session() as session:
        problem = session.get(ProblemRow, c.problem_id)
        problem_hash = problem.content_hash if problem is not None else ""
    env = c.environment
    decision = c.decision
    return Certificate(
        kernel=kernel.name,
        problem=kernel.name,
        kind=kernel.problem_kind,
        backend=c.backend,
        variant="",
        run_id=c.run_id,
        candidate_id=c.id,
        problem_hash=problem_hash,
        reference_sha256=sha256(kernel.reference_source),
        baseline_sha256=sha256(kernel.baseline_source),
        candidate_sha256=sha256(c.source or ""),
        diff_vs_baseline=c.diff_baseline,
        verdict=verdict_part(record, number, vs),
        checks=checks_of(c.verdict, c.timing),
        isolation=c.isolation,
        device=device_of(c),
        versions={name: env.get(name) for name in ("torch", "triton", "cuda", "python", "kernel_agent", "compiler")},
        review=Review(
            findings=list(c.verdict.get("static") or []),
            flags=list(c.flags),
            decision=decision.decision if decision else None,
            reviewer=decision.reviewer if decision else None,
            note=decision.note if decision else None,
        ),
        origin=origin_of(db, c),
        evaluated_at=c.evaluated_at.isoformat(timespec="seconds") if c.evaluated_at else "",
    )
