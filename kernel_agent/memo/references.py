"""A problem's reference points on this device: the stored ones reused, the missing (or stale) ones measured
like any candidate (through the run's executor in `optimize`, in this process in `eval`) and stored."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from kernel_agent.core.verdict import Verdict
from kernel_agent.evaluate.pipeline import EvalOptions, run_device
from kernel_agent.evaluate.references import KINDS, Reference, ReferencePoint, point_of, reference_job
from kernel_agent.measure.ceilings import fingerprint_key
from kernel_agent.problem.load import Problem

if TYPE_CHECKING:
    from kernel_agent.db.session import Database

Measure = Callable[[Problem, str, EvalOptions], Verdict]  # evaluate(), or an executor's submit(...).result()


def reference_points(
    db: Database | None,
    problem: Problem,
    options: EvalOptions,
    measure: Measure | None,
    remeasure_since: datetime | None = None,
    announce: Callable[[Reference], None] | None = None,
    kinds: tuple[Reference, ...] = KINDS,
) -> dict[Reference, ReferencePoint]:
    """Each kind's point: stored, or measured now; a point stored before `remeasure_since` is measured again
    (a resumed `--remeasure-references` run does not redo the ones it already replaced). Without `measure`,
    the stored points only; without a database (`db` None), each measured now and stored nowhere."""
    if db is None:
        return {kind: _measured(problem, kind, options, measure, announce) for kind in kinds} if measure else {}
    from kernel_agent.db.references import store_point, stored_points
    from kernel_agent.db.writes import problem_hash

    fingerprint = fingerprint_key(run_device(problem, options.device), options.threads)
    digest = problem_hash(problem)
    stored = stored_points(db, digest, fingerprint)
    found: dict[Reference, ReferencePoint] = {}
    for kind in kinds:
        known = stored.get(kind)
        stale = known is not None and remeasure_since is not None and known.measured_at < remeasure_since
        if known is not None and (not stale or measure is None):
            found[kind] = known.point
            continue
        if measure is None:
            continue
        if announce is not None:
            announce(kind)
        job = reference_job(problem, kind, options)
        verdict = measure(job.problem, job.source, job.options)
        store_point(db, digest, fingerprint, point_of(kind, verdict), verdict, replace=stale)
        found[kind] = stored_points(db, digest, fingerprint)[kind].point  # a concurrent run's, if it stored first
    return found


def _measured(
    problem: Problem,
    kind: Reference,
    options: EvalOptions,
    measure: Measure,
    announce: Callable[[Reference], None] | None,
) -> ReferencePoint:
    if announce is not None:
        announce(kind)
    job = reference_job(problem, kind, options)
    return point_of(kind, measure(job.problem, job.source, job.options))
