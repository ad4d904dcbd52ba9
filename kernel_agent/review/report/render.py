"""Render the report template (shipped in the package) with jinja2, autoescaped."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from kernel_agent import __version__
from kernel_agent.db.session import Database
from kernel_agent.review.report.data import gather


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"


def _speedup(value: float | None) -> str:
    return f"{value:.3f}x" if value is not None else "-"


def _interval(low: float | None, high: float | None) -> str:
    return f"[{low:.3f}, {high:.3f}]" if low is not None and high is not None else "-"


def _json(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, default=str)


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("kernel_agent.review.report", "templates"),
        autoescape=select_autoescape(["j2", "html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(ms=_ms, speedup=_speedup, tojson_pretty=_json)
    env.globals.update(interval=_interval, safe=Markup)
    return env


def render(db: Database, run_id: int) -> str:
    data = gather(db, run_id)
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return environment().get_template("report.html.j2").render(data=data, generated=generated, version=__version__)
