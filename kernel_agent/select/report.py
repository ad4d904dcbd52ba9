"""The selector report: one row per selector, the metrics of `score.DEFINITIONS`, and those definitions."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kernel_agent.select.score import DEFINITIONS, SelectorScore

COLUMNS = (
    "selector",
    "eff",
    "P10",
    "worst",
    "top-1",
    "top-5",
    "tau",
    "W/T/L",
    "vs default [95% CI]",
    "timed",
    "abstain",
)


def row(s: SelectorScore) -> list[str]:
    ci = "" if s.vs_default_ci is None else f" [{s.vs_default_ci[0]:.3f}, {s.vs_default_ci[1]:.3f}]"
    return [
        s.name,
        f"{s.geomean:.3f}",
        f"{s.p10:.3f}",
        f"{s.worst:.3f}",
        f"{s.top1:.0%}",
        f"{s.top5:.0%}",
        "-" if s.tau is None else f"{s.tau:.2f}",
        f"{s.wins}/{s.ties}/{s.losses}",
        ("-" if s.vs_default is None else f"{s.vs_default:.3f}") + ci,
        f"{s.timed_fraction:.1%}",
        f"{s.abstain_rate:.0%}",
    ]


def markdown(scores: list[SelectorScore]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row(s)) + " |" for s in scores]
    return "\n".join(lines)


def definitions() -> str:
    return "\n".join(f"- {name}: {text}" for name, text in DEFINITIONS.items())


def to_json(score: SelectorScore) -> dict[str, Any]:
    data = asdict(score)
    data["per_shape"] = [{**p, "shape": list(p["shape"])} for p in data["per_shape"]]
    return data
