"""The tuning times table: reads and writes of `tune` rows, and the per-shape config table of a variant.

A row is inserted once per (problem, variant, device fingerprint, dtype, shape, config, stage), so a
resumed or concurrent tune never duplicates one; what is stored is what selectors are scored from.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from kernel_agent.core.tuning import (
    ConfigTime,
    Stage,
    config_key,
    parse_config,
    parse_shape,
    shape_key,
)
from kernel_agent.db.models import TuningTimeRow, utcnow
from kernel_agent.db.session import Database
from kernel_agent.db.writes import insert_if_absent

_KEY = ["problem_hash", "variant_hash", "fingerprint", "dtype", "shape", "config", "stage"]


@dataclass(frozen=True)
class VariantKey:
    """Whose rows: a problem's content, one variant's source, one device fingerprint, one dtype."""

    problem: str
    problem_hash: str
    variant_hash: str
    fingerprint: str
    dtype: str


class TuningStore:
    """`tune.ground_truth.Store` over the database, for one variant key."""

    def __init__(self, db: Database, key: VariantKey) -> None:
        self.db, self.key = db, key

    def stored(self) -> list[ConfigTime]:
        return stored_times(self.db, self.key)

    def put(self, rows: list[ConfigTime]) -> None:
        with self.db.write() as session:
            for row in rows:
                insert_if_absent(session, TuningTimeRow.__table__, self._values(row), _KEY)

    def _values(self, row: ConfigTime) -> dict:
        key = self.key
        return {
            "problem": key.problem,
            "problem_hash": key.problem_hash,
            "variant_hash": key.variant_hash,
            "fingerprint": key.fingerprint,
            "dtype": row.dtype,
            "shape": shape_key(row.shape),
            "config": config_key(row.config),
            "stage": int(row.stage),
            "status": row.status,
            "time_ms": row.time_ms,
            "ci_low_ms": row.ci_ms[0] if row.ci_ms else None,
            "ci_high_ms": row.ci_ms[1] if row.ci_ms else None,
            "speedup": row.speedup,
            "baseline_ms": row.baseline_ms,
            "reason": row.reason[:1000],
            "measured_at": utcnow(),
        }


def stored_times(db: Database, key: VariantKey) -> list[ConfigTime]:
    with db.session() as session:
        rows = session.scalars(
            select(TuningTimeRow)
            .where(
                TuningTimeRow.problem_hash == key.problem_hash,
                TuningTimeRow.variant_hash == key.variant_hash,
                TuningTimeRow.fingerprint == key.fingerprint,
                TuningTimeRow.dtype == key.dtype,
            )
            .order_by(TuningTimeRow.id)
        ).all()
        return [_record(row) for row in rows]


def _record(row: TuningTimeRow) -> ConfigTime:
    ci = (row.ci_low_ms, row.ci_high_ms) if row.ci_low_ms is not None and row.ci_high_ms is not None else None
    return ConfigTime(
        shape=parse_shape(row.shape),
        dtype=row.dtype,
        config=parse_config(row.config),
        stage=Stage(row.stage),
        status=row.status,
        time_ms=row.time_ms,
        ci_ms=ci,
        speedup=row.speedup,
        baseline_ms=row.baseline_ms,
        reason=row.reason,
    )


def tuned_variants(db: Database, problem_hash: str) -> list[VariantKey]:
    """Every (variant, fingerprint, dtype) tuned for this problem content, oldest first."""
    with db.session() as session:
        rows = session.execute(
            select(
                TuningTimeRow.problem,
                TuningTimeRow.variant_hash,
                TuningTimeRow.fingerprint,
                TuningTimeRow.dtype,
            )
            .where(TuningTimeRow.problem_hash == problem_hash)
            .group_by(TuningTimeRow.problem, TuningTimeRow.variant_hash, TuningTimeRow.fingerprint, TuningTimeRow.dtype)
            .order_by(TuningTimeRow.variant_hash)
        ).all()
    return [VariantKey(r[0], problem_hash, r[1], r[2], r[3]) for r in rows]
