"""Render the report template (shipped in the package) with jinja2, autoescaped."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from kernel_agent import __version__
from kernel_agent.core.of_record import NumberOfRecord
from kernel_agent.core.timing_result import TimingResult
from kernel_agent.db.session import Database
from kernel_agent.review.report.data import gather


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"


def _speedup(value: float | None) -> str:
    return f"{value:.3f}x" if value is not None else "-"


def _interval(low: float | None, high: float | None) -> str:
    return f"[{low:.3f}, {high:.3f}]" if low is not None and high is not None else "-"


def quote(number: NumberOfRecord) -> str:
    """A number of record as the report writes it: `1.475x [1.350, 1.610]`, or `re-timing` while withheld."""
    if number.withheld or number.speedup is None:
        return number.cell(3)
    return f"{number.cell(3)} {_interval(*(number.ci or (None, None)))}"


def speed_class(timing: TimingResult | None) -> str:
    """A timed verdict's four-way class in words ("SAME: same speed within 3%"); '' for one timed before classes."""
    res = timing.resolution if timing is not None else None
    if res is None or not res.speed_class:
        return ""
    return f"{res.speed_class}: {res.words or ''}"


def _early(number: NumberOfRecord) -> str:
    """The early look a re-timing superseded, labelled: never a headline."""
    early = number.early_look
    if early is None or early.speedup is None:
        return ""
    looked = f"{_speedup(early.speedup)} {_interval(*(early.ci or (None, None)))}"
    return f"early look {looked}, superseded by the re-timing (candidate {number.candidate})"


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
    env.globals.update(interval=_interval, quote=quote, early=_early, speed=speed_class, safe=Markup)
    return env


def render(db: Database, run_id: int) -> str:
    data = gather(db, run_id)
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return environment().get_template("report.html.j2").render(data=data, generated=generated, version=__version__)
