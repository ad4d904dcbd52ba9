"""`kernel-agent e2e PACKAGE --model RECIPE`: the package's kernels inside a real model, end to end.

Order: the package's files against their certificates (a changed file is refused before anything of it runs),
the recipe's model built, the kernels swapped into a copy, the outputs of both models compared within the recipe's
tolerance (a mismatch ends it: nothing is timed), the share of each swapped layer in the unswapped model's
forward, then the two forward passes A/B-timed. The micro speedups come from the certificates, the model speedup
from this run; the Amdahl bound from the shares and the micro speedups against torch eager (what the unswapped
model's layers run) says how much the micro numbers could buy here at most.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from kernel_agent.core.certificate import Certificate
from kernel_agent.prove.model_ab import amdahl, check_outputs, shares, time_models
from kernel_agent.prove.recipe import ModelCase
from kernel_agent.prove.shipped import PackageError, Shipped, Variant, copy_sealed, tampered
from kernel_agent.prove.swap import swap


@dataclass(frozen=True)
class OpRow:
    """One kernel of the package in the model: its certified micro speedups and its share of the forward pass."""

    kernel: str
    layers: int  # layer instances swapped
    micro: float | None  # over its problem's baseline (certified)
    micro_ci: list[float] | None
    vs_eager: float | None  # over torch eager of its reference (certified), what the unswapped model runs
    vs_eager_ci: list[float] | None
    share: dict[str, float]  # shape label -> share of the unswapped forward pass


@dataclass
class E2EResult:
    """What `e2e` measured: status (`timed`, `mismatch`, `not_timed`), the ops, the model speedup per shape."""

    package: str
    package_name: str
    format: str
    recipe: str
    device: str
    status: str
    reason: str
    ops: list[OpRow]
    unused: dict[str, str]  # kernel -> why the model runs no layer of it
    swapped_by: str
    tolerance: list[float]
    max_abs_error: float | None
    speedup: float | None = None
    ci: list[float] | None = None
    per_shape: list[dict[str, Any]] = field(default_factory=list)
    amdahl: dict[str, float | None] = field(default_factory=dict)  # shape label -> bound from the shares
    rounds: int = 0
    threads: int = 0
    run_ids: list[int] = field(default_factory=list)
    note: str = ""
    contention: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _op(c: Certificate, layers: int, share: dict[str, float]) -> OpRow:
    eager = c.verdict.against.get("eager")
    return OpRow(
        kernel=c.kernel,
        layers=layers,
        micro=c.verdict.speedup,
        micro_ci=c.verdict.ci,
        vs_eager=eager.value if eager else None,
        vs_eager_ci=eager.ci if eager else None,
        share=share,
    )


def run_e2e(shipped: Shipped, case: ModelCase, recipe: str, device: str, rounds: int) -> E2EResult:
    """Swap, check, share, time. Raises PackageError for a package changed after export, before any of it runs:
    every file against the manifest, then the package imported from a copy made from the manifest alone."""
    variants = [v for v in shipped.variants if shipped.format == "pip" or v.name == device]
    if not variants:
        raise PackageError(f"{shipped.root}: no variant of this package was built for {device}")
    for variant in variants:
        changed = tampered(variant)
        if changed:
            raise PackageError(f"{variant.folder}: {changed[0]}")
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder)
        for variant in variants:
            copy_sealed(variant, copy if shipped.format == "pip" else copy / "build")
        return _run(replace(shipped, root=copy), variants, case, recipe, device, rounds)


def _run(
    shipped: Shipped, variants: list[Variant], case: ModelCase, recipe: str, device: str, rounds: int
) -> E2EResult:
    certified = {c.kernel: c for v in variants for c in v.bundle.certificates}
    unused = {k: "the model has no layer this kernel replaces" for k in certified if k not in case.layers}
    unused |= {k: why for k, why in case.unused.items() if k in certified}
    swapped = swap(case, shipped.root, shipped.format, shipped.package, sorted(certified), device)
    counts = {k: n for k, n in swapped.counts.items() if n}
    unused |= {k: "the model holds no instance of its layer" for k, n in swapped.counts.items() if not n}
    result = E2EResult(
        package=str(variants[0].folder.parent if shipped.format == "pip" else variants[0].folder.parents[1]),
        package_name=shipped.package,
        format=shipped.format,
        recipe=recipe,
        device=device,
        status="timed",
        reason="",
        ops=[],
        unused=unused,
        swapped_by=swapped.how,
        tolerance=list(case.tolerance),
        max_abs_error=None,
        threads=torch.get_num_threads(),
        run_ids=sorted({c.run_id for c in certified.values()}),
        note=case.note,
    )
    layers = {k: case.layers[k] for k in counts}
    share = {label: shares(case.model, layers, args) for label, args in case.inputs.items()}
    result.ops = [_op(certified[k], n, {label: share[label][k] for label in share}) for k, n in sorted(counts.items())]
    check = check_outputs(case.model, swapped.model, case.inputs, case.tolerance)
    result.max_abs_error = check.max_abs if math.isfinite(check.max_abs) else None
    if not counts:
        result.status, result.reason = "not_timed", "no kernel of the package has a layer in this model"
        return result
    if not check.passed:
        result.status = "mismatch"
        result.reason = f"the swapped model's outputs differ beyond rtol {case.tolerance[0]:g}, atol " + (
            f"{case.tolerance[1]:g}: {check.where}"
        )
        return result
    eager = {op.kernel: op.vs_eager for op in result.ops if op.vs_eager}
    result.amdahl = {label: amdahl(s, eager) for label, s in share.items()}
    timing = time_models(case.model, swapped.model, case.inputs, rounds)
    result.rounds, result.contention = timing.rounds, timing.contention
    if timing.estimate is None:
        result.status, result.reason = "not_timed", timing.refusal
        return result
    est = timing.estimate
    result.speedup, result.ci = est.speedup, [est.ci_low, est.ci_high]
    result.per_shape = [
        {
            "shape": label,
            "speedup": e["speedup"],
            "ci": e["speedup_ci"],
            "plain_ms": e["baseline_median_ms"],
            "swapped_ms": e["candidate_median_ms"],
        }
        for label, e in zip(timing.labels, est.per_shape)
    ]
    return result
