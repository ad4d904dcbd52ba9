"""What the review page shows, gathered into plain records (the template only formats, escaping everything).

The queue is the terminal walk's (`decisions.queue`: accepted and flagged candidates, best first), the numbers are
the report's (number of record, speed class, reference points, certificate) and the diffs are the report's diff
code with class names instead of inline styles.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from kernel_agent.core.text import direction_controls
from kernel_agent.db.evidence import against_torch, certificate
from kernel_agent.db.review_reads import CandidateRecord, Decision, KernelRecord, lineage
from kernel_agent.db.session import Database
from kernel_agent.review.decisions import queue
from kernel_agent.review.report.diffs import Line, Row, rows, unified
from kernel_agent.review.report.render import quote, speed_class


@dataclass
class DiffView:
    """One comparison, in both layouts."""

    title: str
    rows: list[Row]
    lines: list[Line]


@dataclass
class Step:
    """One candidate of a lineage, baseline first."""

    id: int
    origin: str
    status: str
    number: str


@dataclass
class CandidateView:
    id: int
    kernel: str
    status: str
    reason: str
    number: str  # the number of record with its interval, or `re-timing`
    speed_class: str
    versus: dict[str, str]  # eager / compile -> "0.52x [0.50, 0.55]" or the reason there is none
    flags: list[str]
    checks: str
    device: str
    origin: str
    round: int
    parent_id: int | None
    note: str
    output: str  # what the candidate printed while it was checked
    decision: Decision | None
    lineage: list[Step]
    diffs: list[DiffView]
    direction: list[str]  # direction-changing characters in its source, as code points
    certificate: str | None  # the certificate export would write with it (JSON), or why there is none

    @property
    def state(self) -> str:
        """approved, rejected or awaiting: what the page's filters select on."""
        if self.decision is None:
            return "awaiting"
        return "approved" if self.decision.decision == "approve" else "rejected"


@dataclass
class KernelPage:
    name: str
    candidates: list[CandidateView] = field(default_factory=list)


@dataclass
class ReviewPage:
    run_id: int
    reviewer: str
    kernels: list[KernelPage]

    @property
    def candidate_ids(self) -> set[int]:
        return {c.id for k in self.kernels for c in k.candidates}


def _versus(db: Database, c: CandidateRecord, kernel: KernelRecord) -> dict[str, str]:
    shown = {}
    for kind, rel in against_torch(db, c, kernel.number_of(c)).items():
        if rel.value is None or rel.ci is None:
            shown[kind] = rel.reason or "-"
        else:
            shown[kind] = f"{rel.value:.2f}x [{rel.ci[0]:.2f}, {rel.ci[1]:.2f}]"
    return shown


def _certificate(db: Database, kernel: KernelRecord, c: CandidateRecord) -> str:
    try:
        made = certificate(db, kernel, c, against_torch(db, c, kernel.number_of(c)))
    except Exception as exc:  # noqa: BLE001 - an old row without what a certificate needs: say so, show the rest
        return f"no certificate: {exc}"
    return json.dumps(made.to_json(), indent=1, sort_keys=True, default=str)


def _diffs(kernel: KernelRecord, c: CandidateRecord) -> list[DiffView]:
    """Against the baseline, then against the parent when the parent is another candidate."""
    source = c.source or ""
    views = [
        DiffView(
            "against the baseline",
            rows(kernel.baseline_source, source, classes=True),
            unified(kernel.baseline_source, source, classes=True),
        )
    ]
    parent = next((p for p in kernel.candidates if p.id == c.parent_id), None)
    if parent is not None and parent.source is not None and parent.source != kernel.baseline_source:
        views.append(
            DiffView(
                f"against the parent (candidate {parent.id})",
                rows(parent.source, source, classes=True),
                unified(parent.source, source, classes=True),
            )
        )
    return views


def _candidate(db: Database, kernel: KernelRecord, c: CandidateRecord) -> CandidateView:
    passed, checked = c.checks_passed
    return CandidateView(
        id=c.id,
        kernel=kernel.name,
        status=c.status,
        reason=c.reason,
        number=quote(kernel.number_of(c)),
        speed_class=speed_class(c.timing),
        versus=_versus(db, c, kernel),
        flags=c.flags,
        checks=f"{passed}/{checked} passed ({', '.join(c.dtypes) or '-'})",
        device=f"{c.device} ({c.device_name})" if c.device_name else c.device,
        origin=c.origin,
        round=c.round,
        parent_id=c.parent_id,
        note=c.note,
        output=str(c.verdict.get("candidate_output") or ""),
        decision=c.decision,
        lineage=[
            Step(s.id, s.origin, s.status, quote(kernel.number_of(s)) if s.evaluated_at else "-")
            for s in lineage(kernel.candidates, c.id)
        ],
        diffs=_diffs(kernel, c),
        direction=direction_controls(c.source or ""),
        certificate=_certificate(db, kernel, c),
    )


def gather(db: Database, run_id: int, reviewer: str) -> ReviewPage:
    """Every kernel of the run with its reviewable candidates, best first, and the latest decision on each."""
    return ReviewPage(
        run_id,
        reviewer,
        [KernelPage(k.name, [_candidate(db, k, c) for c in found]) for k, found in queue(db, run_id)],
    )
