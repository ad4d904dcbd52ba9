"""The reference points table: torch eager and torch.compile per (problem content, device fingerprint, kind).

Kept like the device ceilings: the first measurement per key is kept (concurrent runs agree on one), and
a remeasure replaces it. The key's fingerprint (`measure.ceilings.fingerprint_key`) holds the device, the
torch version and the thread count; the problem's content hash covers its reference and its baseline,
so a changed baseline gets new points.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from kernel_agent.core.reference_point import Reference, ReferencePoint
from kernel_agent.core.verdict import Verdict
from kernel_agent.db.models import ReferencePointRow, utcnow
from kernel_agent.db.session import Database
from kernel_agent.db.writes import insert_if_absent


@dataclass(frozen=True)
class StoredPoint:
    """A point and when it was stored (a remeasure replaces the points stored before a given moment)."""

    point: ReferencePoint
    measured_at: datetime


def stored_points(db: Database, problem_hash: str, fingerprint: str) -> dict[Reference, StoredPoint]:
    """Every reference point stored for this problem content on this device fingerprint."""
    with db.session() as session:
        rows = session.scalars(
            select(ReferencePointRow).where(
                ReferencePointRow.problem_hash == problem_hash, ReferencePointRow.fingerprint == fingerprint
            )
        ).all()
        return {
            Reference.of(row.kind): StoredPoint(ReferencePoint.from_json(row.data), row.measured_at) for row in rows
        }


def store_point(
    db: Database, problem_hash: str, fingerprint: str, point: ReferencePoint, verdict: Verdict, replace: bool
) -> None:
    values = {
        "problem_hash": problem_hash,
        "fingerprint": fingerprint,
        "kind": point.kind.value,
        "status": point.status,
        "speedup": point.speedup,
        "data": point.to_json(),
        "verdict": verdict.to_dict(),
        "measured_at": utcnow(),
    }
    with db.write() as session:
        if replace:
            row = session.scalar(
                select(ReferencePointRow).where(
                    ReferencePointRow.problem_hash == problem_hash,
                    ReferencePointRow.fingerprint == fingerprint,
                    ReferencePointRow.kind == point.kind.value,
                )
            )
            if row is not None:
                for name, value in values.items():
                    setattr(row, name, value)
                return
        insert_if_absent(session, ReferencePointRow.__table__, values, ["problem_hash", "fingerprint", "kind"])


def points_seen_by(db: Database, problem_hash: str, environment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The points stored for the device a verdict ran on (its `environment`): what a run's views show."""
    from kernel_agent.core.fingerprint import environment_key

    found = stored_points(db, problem_hash, environment_key(environment))
    return {kind.value: stored.point.to_json() for kind, stored in found.items()}
