"""Run-level metrics in KernelBench's terms: fast_p and the geometric-mean speedup, over a run's kernels.

Pure arithmetic on typed records, so `optimize`, `runs show --json` and their tests share one definition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

THRESHOLDS = (0.0, 1.0, 1.5, 2.0)
AGAINST = ("baseline", "eager", "compile")

DEFINITION = (
    "fast_p: the share of the run's kernels whose speedup (the number of record of an accepted best: its re-timing "
    "with every round when that read faster too, or the low end of an early look too wide to quote; else the best "
    "point estimate of a correct candidate) is correct and more than p times "
    "as fast as the reference; fast_0 is the share with a correct "
    "candidate. Against eager and compile, only kernels with that reference point measured are counted (n). "
    "geomean: the geometric mean of those speedups over the kernels with a correct candidate."
)


@dataclass(frozen=True)
class KernelOutcome:
    """One kernel of a run: whether a candidate verified, and its best speedup against each reference
    (None: no such reference point, or no correct candidate)."""

    name: str
    correct: bool
    speedups: dict[str, float | None] = field(default_factory=dict)
    has_reference: dict[str, bool] = field(default_factory=dict)  # eager/compile: a usable point exists

    def counted(self, against: str) -> bool:
        return against == "baseline" or self.has_reference.get(against, False)


@dataclass(frozen=True)
class RunMetrics:
    kernels: dict[str, int]  # against -> kernels counted (n)
    fast_p: dict[str, dict[str, float | None]]  # against -> "fast_1.0" -> share (None: no kernel counted)
    geomean: dict[str, float | None]

    def to_json(self) -> dict[str, Any]:
        return {"definition": DEFINITION, "n": self.kernels, "fast_p": self.fast_p, "geomean": self.geomean}


def fast_p(outcomes: list[KernelOutcome], p: float, against: str) -> float | None:
    """KernelBench's fast_p: correct and speedup > p, as a share of the kernels counted against `against`."""
    counted = [o for o in outcomes if o.counted(against)]
    if not counted:
        return None
    fast = [o for o in counted if o.correct and (o.speedups.get(against) or 0.0) > p]
    return len(fast) / len(counted)


def geomean(outcomes: list[KernelOutcome], against: str) -> float | None:
    values = [o.speedups[against] for o in outcomes if o.correct and o.counted(against) and o.speedups.get(against)]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))  # type: ignore[arg-type]


def label(p: float) -> str:
    return "fast_0" if p == 0 else f"fast_{p:.1f}"


def outcome(name: str, speedup: float | None, references: dict[str, float | None]) -> KernelOutcome:
    """A kernel from its best verified speedup over the baseline (None: no candidate verified) and each
    reference point's speedup over the same baseline (None: not measured, or it failed)."""
    speedups: dict[str, float | None] = {"baseline": speedup}
    for against, reference in references.items():
        speedups[against] = speedup / reference if speedup is not None and reference else None
    return KernelOutcome(name, speedup is not None, speedups, {k: bool(v) for k, v in references.items()})


def run_metrics(outcomes: list[KernelOutcome]) -> RunMetrics:
    return RunMetrics(
        kernels={a: sum(o.counted(a) for o in outcomes) for a in AGAINST},
        fast_p={a: {label(p): fast_p(outcomes, p, a) for p in THRESHOLDS} for a in AGAINST},
        geomean={a: geomean(outcomes, a) for a in AGAINST},
    )
