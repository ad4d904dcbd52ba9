"""Gather everything the report shows into plain records (the template only formats)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernel_agent.core.certificate import Certificate
from kernel_agent.core.of_record import PENDING, NumberOfRecord
from kernel_agent.core.relative import Relative, speedup_vs_json
from kernel_agent.db.models import MEASUREMENTS
from kernel_agent.db.reads import run_detail
from kernel_agent.db.review_reads import CandidateRecord, KernelRecord, kernel_review, lineage, run_kernels
from kernel_agent.db.session import Database
from kernel_agent.review.report.charts import (
    e2e_chart,
    kernel_chart,
    references_chart,
    roofline_chart,
    roofline_data,
    run_chart,
)
from kernel_agent.review.report.diffs import side_by_side

PASSING = ("faster", "correct", "flagged")
PROVENANCE_KEYS = ("device_name", "torch", "triton", "cuda", "python", "kernel_agent", "threads", "platform")


@dataclass
class DiffView:
    title: str
    html: str


@dataclass
class KernelView:
    record: KernelRecord
    chart_svg: str | None
    best: CandidateRecord | None
    lineage: list[CandidateRecord]
    diffs: list[DiffView]
    counts: dict[str, int]
    review: dict[str, Any] | None = (
        None  # a flagged candidate that beats every accepted one (db.review_reads.review_summary)
    )
    # `runs show`'s entry for this kernel (db.reads.run_detail): its number of record, times and speedup_vs
    detail: dict[str, Any] = field(default_factory=dict)
    certificate: Certificate | None = None  # what export would ship with the best (db/evidence.py)

    def number_of(self, c: CandidateRecord) -> NumberOfRecord:
        """A candidate's number of record: what its lineage entry and its row quote (core/of_record.py)."""
        return self.record.number_of(c)


@dataclass
class Failure:
    candidate_id: int
    kernel: str
    round: int
    origin: str
    reason: str


@dataclass
class E2EView:
    """One stored `e2e` run of a package built from this run: its JSON and the micro-vs-model chart."""

    run: dict[str, Any]
    chart_svg: str | None


@dataclass
class ReportData:
    run: dict[str, Any]
    run_chart_svg: str
    kernels: list[KernelView]
    failures: dict[str, list[Failure]]
    provenance: list[dict[str, Any]]
    reviews: list[CandidateRecord] = field(default_factory=list)
    rooflines: list[tuple[str, str]] = field(default_factory=list)  # (device, inline SVG)
    references_svg: str | None = None  # best vs baseline, eager and compile per kernel
    versus: dict[str, dict[str, Any]] = field(default_factory=dict)  # kernel -> speedup_vs (db.reads.run_detail)
    best_speedup: float | str | None = None  # the "best speedup" tile (`best_tile`)
    e2e: list[E2EView] = field(default_factory=list)  # stored e2e runs of packages certified from this run


def _diffs(chain: list[CandidateRecord]) -> list[DiffView]:
    """Baseline -> best, then each step of the lineage when there are intermediate parents."""
    if len(chain) < 2 or chain[0].source is None or chain[-1].source is None:
        return []
    first, last = chain[0], chain[-1]
    views = [
        DiffView(
            f"baseline (candidate {first.id}) vs best (candidate {last.id})",
            side_by_side(first.source, last.source, f"baseline #{first.id}", f"candidate #{last.id}"),
        )
    ]
    if len(chain) > 2:
        for parent, child in zip(chain, chain[1:]):
            if parent.source is not None and child.source is not None:
                views.append(
                    DiffView(
                        f"step: candidate {parent.id} -> candidate {child.id} (round {child.round})",
                        side_by_side(parent.source, child.source, f"#{parent.id}", f"#{child.id}"),
                    )
                )
    return views


def _kernel_view(kernel: KernelRecord, detail: dict[str, Any], db: Database | None = None) -> KernelView:
    best = kernel.best
    chain = lineage(kernel.candidates, best.id) if best else []
    counts: dict[str, int] = {}
    for c in kernel.candidates:
        if c.origin not in MEASUREMENTS:
            counts[c.status] = counts.get(c.status, 0) + 1
    return KernelView(
        kernel,
        kernel_chart(kernel),
        best,
        chain,
        _diffs(chain),
        dict(sorted(counts.items())),
        kernel_review(kernel, db),
        detail,
        _certificate(db, kernel, best) if db is not None and best is not None else None,
    )


def _certificate(db: Database, kernel: KernelRecord, best: CandidateRecord) -> Certificate:
    """The best's certificate as export would write it, without the shipped files' digests (nothing shipped)."""
    from kernel_agent.db.evidence import against_torch, certificate

    return certificate(db, kernel, best, against_torch(db, best, kernel.number_of(best)))


def _provenance(kernels: list[KernelRecord]) -> list[dict[str, Any]]:
    """Each distinct environment the run's verdicts were measured in, with how many verdicts."""
    seen: dict[tuple, dict[str, Any]] = {}
    for k in kernels:
        for c in k.candidates:
            if c.evaluated_at is None:
                continue
            entry = {
                "device": c.device,
                "isolation": c.isolation,
                **{key: c.environment.get(key) for key in PROVENANCE_KEYS},
            }
            key = tuple(sorted((name, str(value)) for name, value in entry.items()))
            if key not in seen:
                seen[key] = {**entry, "verdicts": 0, "kernels": set()}
            seen[key]["verdicts"] += 1
            seen[key]["kernels"].add(k.name)
    return [{**v, "kernels": ", ".join(sorted(v["kernels"]))} for v in seen.values()]


def what_ships(kernel: dict[str, Any]) -> dict[str, Any]:
    """`speedup_vs` of what this kernel would ship: its best candidate, or the baseline itself (exactly 1.0x,
    marked `shipped: baseline`) when nothing beat it, so a kernel with no gain still shows how it stands
    against torch. A best whose number is withheld (`re-timing`) shows no number at all."""
    versus = kernel.get("speedup_vs") or {}
    if (versus.get("baseline") or {}).get("value") is not None or kernel.get("pending"):
        return versus
    itself = speedup_vs_json(Relative(1.0, (1.0, 1.0)), kernel.get("references") or {})
    return {kind: {**entry, "shipped": "baseline"} for kind, entry in itself.items()}


def best_tile(kernels: list[dict[str, Any]]) -> float | str | None:
    """The page's "best speedup" tile: the highest number of record among improved kernels (`runs show`'s
    entries), `re-timing` when every improved kernel's number is withheld, None without one."""
    improved = [k for k in kernels if k["status"] == "improved"]
    quoted = [k["speedup"] for k in improved if k["speedup"] is not None]
    if quoted:
        return max(quoted)
    return PENDING if any(k["pending"] for k in improved) else None


def gather(db: Database, run_id: int) -> ReportData:
    detail = run_detail(db, run_id)
    if detail is None:
        raise ValueError(f"no run {run_id}")
    kernels = run_kernels(db, run_id)
    if len({k.device for k in kernels}) > 1:  # optimize --device cpu,cuda: a kernel per device, named apart
        for record, entry in zip(kernels, detail["kernels"]):
            record.name = entry["name"] = f"{record.name} ({record.device})"
    failures: dict[str, list[Failure]] = {}
    for k in kernels:
        for c in k.candidates:
            if c.status not in PASSING:
                failures.setdefault(c.status, []).append(Failure(c.id, k.name, c.round, c.origin, c.reason))
    reviews = [c for k in kernels for c in k.candidates if c.decision is not None]
    versus = [what_ships(k) for k in detail["kernels"]]
    return ReportData(
        run=detail,
        run_chart_svg=run_chart(kernels),
        kernels=[_kernel_view(k, entry, db) for k, entry in zip(kernels, detail["kernels"])],
        failures=dict(sorted(failures.items(), key=lambda item: -len(item[1]))),
        provenance=_provenance(kernels),
        reviews=reviews,
        rooflines=[(line.device, roofline_chart(line)) for line in roofline_data(kernels)],
        references_svg=references_chart([(k["name"], v) for k, v in zip(detail["kernels"], versus)]),
        versus={k["name"]: v for k, v in zip(detail["kernels"], versus)},
        best_speedup=best_tile(detail["kernels"]),
        e2e=[E2EView(run, e2e_chart(run)) for run in _e2e_runs(db, run_id)],
    )


def _e2e_runs(db: Database, run_id: int) -> list[dict[str, Any]]:
    from kernel_agent.db.e2e import e2e_runs

    return e2e_runs(db, run_id)
