"""The run report: one self-contained HTML file (inline CSS and SVG, no scripts, nothing fetched)."""

from __future__ import annotations

from kernel_agent.db.session import Database


def render_report(db: Database, run_id: int) -> str:
    """Render the report for one run to an HTML string."""
    from kernel_agent.review.report.render import render

    return render(db, run_id)
