"""Stored `e2e` runs (migration 0007): a package's kernels in a model, so the report can chart micro speedups
beside the model's. Values come in as the JSON the run printed; nothing here imports the model or the package."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from kernel_agent.db.models import E2ERunRow
from kernel_agent.db.session import Database


def store_e2e(db: Database, result: dict[str, Any]) -> int:
    """One e2e run's JSON (prove/e2e.py E2EResult.to_json) as a row; its id."""
    ci = result.get("ci") or [None, None]
    with db.write() as session:
        row = E2ERunRow(
            package=str(result["package"]),
            package_name=str(result["package_name"]),
            format=str(result["format"]),
            recipe=str(result["recipe"]),
            device=str(result["device"]),
            status=str(result["status"]),
            reason=str(result.get("reason", "")),
            speedup=result.get("speedup"),
            ci_low=ci[0],
            ci_high=ci[1],
            run_ids=list(result.get("run_ids") or []),
            data=result,
        )
        session.add(row)
        session.flush()
        return row.id


def e2e_runs(db: Database, run_id: int | None = None) -> list[dict[str, Any]]:
    """Stored e2e runs, newest first: every one, or those whose package certifies a kernel of `run_id`."""
    with db.session() as session:
        rows = session.scalars(select(E2ERunRow).order_by(E2ERunRow.id.desc())).all()
        return [
            {"id": row.id, "created_at": row.created_at.isoformat(timespec="seconds"), **dict(row.data or {})}
            for row in rows
            if run_id is None or run_id in (row.run_ids or [])
        ]
