"""`kernel-agent e2e PACKAGE --model RECIPE`: the package's kernels inside a real model, end to end.

Order: the package's files against their certificates (a changed file is refused before anything of it runs),
the recipe's model built, the kernels swapped into a copy, the outputs of both models compared within the recipe's
tolerance (a mismatch ends it: nothing is timed), the share of each swapped layer in the unswapped model's
forward, then the two forward passes A/B-timed. The micro speedups come from the certificates, the model speedup
from this run; the Amdahl bound from the shares and the micro speedups against torch eager (what the unswapped
model's layers run) says how much the micro numbers could buy here at most.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernel_agent.core.certificate import Certificate
from kernel_agent.export.user_process import UserProcessError, end_uid, privileges, user_env, user_uid
from kernel_agent.prove.dispatch import NO_KERNEL_RAN, DispatchError, DispatchFindings, dispatch_findings, parse_counts
from kernel_agent.prove.model_ab import amdahl, check_outputs, precision_check, shares, time_models
from kernel_agent.prove.recipe import ModelCase, RecipeError, load_recipe
from kernel_agent.prove.shipped import PackageError, Shipped, Variant, copy_sealed, open_package, tampered
from kernel_agent.prove.swap import Swapped, swap

SHARE_SLACK = 0.05  # a share within this of the regions.json interval agrees with it


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
    dispatch: list[str] = field(default_factory=list)  # each kernel's calls by path while the outputs were checked
    unswapped: dict[str, dict[str, str]] = field(default_factory=dict)  # kernel -> instance path -> guard missed
    realized: dict[str, float | None] = field(default_factory=dict)  # label -> (speedup - 1) / (bound - 1)
    flags: list[str] = field(default_factory=list)  # a model speedup above what its bound allows, and why it may be
    precision: list[float] = field(default_factory=list)  # unswapped, swapped: worst relative error vs float64
    shares_against_regions: list[str] = field(default_factory=list)  # this run's shares beside regions.json's

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


def run_e2e(shipped: Shipped, recipe: str, size: str, device: str, rounds: int, threads: int) -> E2EResult:
    """Check, then load the recipe, swap, check outputs, share, time. Raises PackageError for a package changed
    after export, before any of it runs: every file against the manifest, then the package imported from a copy
    made from the manifest alone. As root, all of that runs in a child process as an unused uid of its own
    (export/user_process.py), so the package's code can write nothing the tool or the user reads later."""
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
        uid = user_uid()
        if uid is None:
            result = in_process(copy, recipe, size, device, rounds, threads)
        else:
            result = apart(copy, uid, recipe, size, device, rounds, threads)
    result.package, result.recipe = str(shipped.root), recipe
    return result


def in_process(copy: Path, recipe: str, size: str, device: str, rounds: int, threads: int) -> E2EResult:
    """The whole measurement in this process, on the checked copy at `copy`."""
    torch.set_num_threads(threads)
    shipped = open_package(copy)
    variants = [v for v in shipped.variants if shipped.format == "pip" or v.name == device]
    return _run(shipped, variants, load_recipe(recipe, size), recipe, device, rounds)


def apart(copy: Path, uid: int, recipe: str, size: str, device: str, rounds: int, threads: int) -> E2EResult:
    """`in_process` in a child process of uid `uid`: its folder, HOME and the copy its own, nothing else
    writable to it; what it leaves is killed and swept."""
    started = time.time() - 1.0
    os.chmod(copy, 0o755)
    for path in (copy, *copy.rglob("*")):
        os.chown(path, uid, uid, follow_symlinks=False)
    where, _, factory = recipe.rpartition(":")
    recipe_file = Path(where).resolve()
    # The recipe's folder where other users may read it (its siblings import), else the file alone: a private
    # folder (pytest's, a 0700 home) would stay closed to the uid even once shown.
    folder_open = recipe_file.is_file() and recipe_file.parent.stat().st_mode & 0o005 == 0o005
    extra = (recipe_file.parent,) if folder_open else (recipe_file,) if recipe_file.is_file() else ()
    if extra:  # the child starts in its own folder: a recipe file is named by its whole path
        recipe = f"{recipe_file}:{factory}"
    args = json.dumps(
        {"copy": str(copy), "recipe": recipe, "size": size, "device": device, "rounds": rounds, "threads": threads}
    )
    try:
        command = [*privileges(uid, extra), sys.executable, "-m", "kernel_agent.prove.e2e", args]
    except UserProcessError as exc:
        raise PackageError(f"e2e {exc}") from None
    try:
        env = user_env(copy)  # kernel_agent importable however it was installed (an editable checkout's hook is gone)
        here = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
        proc = subprocess.run(command, cwd=copy, env=env, capture_output=True, text=True)
    finally:
        end_uid(uid, started)
    last = (proc.stdout.strip().splitlines() or [""])[-1]
    try:
        data = json.loads(last)
    except ValueError:
        why = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise PackageError(f"the e2e process ended (exit {proc.returncode}): {why}") from None
    if "error" in data:
        raise (RecipeError if data.get("kind") == "recipe" else PackageError)(data["error"])
    return E2EResult(**{**data, "ops": [OpRow(**op) for op in data["ops"]]})


def child_main(argv: list[str]) -> None:
    """The child's side of `apart`: one JSON line, the result or the one-line error."""
    spec = json.loads(argv[0])
    try:
        result = in_process(
            Path(spec["copy"]), spec["recipe"], spec["size"], spec["device"], spec["rounds"], spec["threads"]
        )
        line = json.dumps(result.to_json(), default=str)
    except RecipeError as exc:
        line = json.dumps({"error": str(exc), "kind": "recipe"})
    except PackageError as exc:
        line = json.dumps({"error": str(exc), "kind": "package"})
    except ImportError as exc:
        why = f"{exc.name or exc} is not installed: the hf-kernels format is swapped in with `pip install kernels`"
        line = json.dumps({"error": why, "kind": "recipe"})
    sys.stdout.write("\n" + line + "\n")


def dispatched(swapped: Swapped, expected: dict[str, int]) -> DispatchFindings:
    """Each kernel's calls by path over the output check's passes (one per shape label, each layer instance once):
    every expected call on the optimized path, or which fell back and why."""
    snapshot = swapped.dispatch_counts()
    if snapshot is None:
        return DispatchFindings(
            ("dispatch counts unavailable: the package was exported before its runtime counted",), False
        )
    misses = {k: b.misses_by_reason() for k, b in swapped.bound.items() if b.misses_by_reason()}
    if misses:  # calls a binding's guard kept from the package: fallbacks the package never saw
        try:
            counts = parse_counts(snapshot)
        except DispatchError as error:
            return DispatchFindings((f"dispatch counts refused: {error}",), False)
        merged = {k: {"optimized": c.optimized, "fallback": dict(c.fallbacks)} for k, c in counts.items()}
        for kernel, reasons in misses.items():
            entry = merged.setdefault(kernel, {"optimized": 0, "fallback": {}})
            for reason, n in reasons.items():
                entry["fallback"][f"binding guard: {reason}"] = n
        snapshot = merged
    return dispatch_findings(snapshot, expected)


def _first(refused: dict[str, str]) -> str:
    path, why = next(iter(refused.items()), ("", "no instance"))
    return f"{path}: {why}" + (f"; {len(refused) - 1} more" if len(refused) > 1 else "")


def _run(
    shipped: Shipped, variants: list[Variant], case: ModelCase, recipe: str, device: str, rounds: int
) -> E2EResult:
    certified = {c.kernel: c for v in variants for c in v.bundle.certificates}
    unused = {
        k: case.unbound.get(k, "the model has no layer this kernel replaces")
        for k in certified
        if k not in case.layers and k not in case.bindings
    }
    unused |= {k: why for k, why in case.unused.items() if k in certified}
    if shipped.format != "pip":
        unused |= {
            k: "module bindings swap into the pip format only (hf-kernels: not built)"
            for k in certified
            if k in case.bindings
        }
    swapped = swap(case, shipped.root, shipped.format, shipped.package, sorted(certified), device)
    counts = {k: n for k, n in swapped.counts.items() if n}
    unused |= {k: "the model holds no instance of its layer" for k, n in swapped.counts.items() if not n}
    unused |= {
        k: f"no instance held its guards ({_first(b.refused)})" for k, b in swapped.bound.items() if not b.swapped
    }
    result = E2EResult(
        package=str(shipped.root),
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
        unswapped={k: dict(b.refused) for k, b in swapped.bound.items() if b.refused},
    )
    layers = {k: [case.model.get_submodule(path) for path in swapped.paths(k, case)] for k in counts}
    share = {label: shares(case.model, layers, args) for label, args in case.inputs.items()}
    result.ops = [_op(certified[k], n, {label: share[label][k] for label in share}) for k, n in sorted(counts.items())]
    result.shares_against_regions = against_regions(share, case.region_shares, torch.get_num_threads())
    swapped.reset_counts()
    check = check_outputs(case.model, swapped.model, case.inputs, case.tolerance)
    result.max_abs_error = check.max_abs if math.isfinite(check.max_abs) else None
    if not counts:
        result.status, result.reason = "not_timed", "no kernel of the package has a layer in this model"
        return result
    ran = dispatched(swapped, {k: n * len(case.inputs) for k, n in counts.items()})  # before any other pass
    result.dispatch = list(ran.lines)
    precision = precision_check(case.model, swapped.model, case.inputs) if check.passed else None
    if precision is not None:
        result.precision = [precision.plain, precision.swapped]
    if ran.lines and ran.lines[0].startswith(NO_KERNEL_RAN):
        result.status, result.reason = "not_timed", ran.lines[0]
        return result
    if not check.passed:
        result.status = "mismatch"
        result.reason = f"the swapped model's outputs differ beyond rtol {case.tolerance[0]:g}, atol " + (
            f"{case.tolerance[1]:g}: {check.where}"
        )
        return result
    if precision is not None and not precision.passed:
        result.status = "mismatch"
        result.reason = f"the swapped model is less precise than twice the model's own error: {precision.where}"
        return result
    against = {op.kernel: _what_the_model_ran(op, swapped) for op in result.ops}
    eager = {k: v[0] for k, v in against.items() if v[0]}
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
    eager_high = {k: v[1][1] for k, v in against.items() if v[1]}
    held_to_bound(result, {label: amdahl(s, eager_high) for label, s in share.items()})
    return result


def _what_the_model_ran(op: OpRow, swapped: Swapped) -> tuple[float | None, list[float] | None]:
    """The micro speedup against what the unswapped model runs in that place, with its interval: for a layer
    class, torch eager of the kernel's reference; for a region bound back, its problem's baseline, which is the
    captured ops of that module as the model runs them (and needs no reference point measured)."""
    if op.kernel in swapped.bound:
        return op.micro, op.micro_ci
    return op.vs_eager, op.vs_eager_ci


def against_regions(share: dict[str, dict[str, float]], stored: dict[str, dict[str, Any]], threads: int) -> list[str]:
    """Each kernel's share here beside the one `regions` timed the same way (hooks), per label: a share outside
    that interval widened by SHARE_SLACK says the inputs, threads or machine differ from the profile's."""
    lines = []
    for label, by_kernel in share.items():
        for kernel, here in sorted(by_kernel.items()):
            then = stored.get(kernel, {}).get(label)
            if not then:
                continue
            f, lo, hi = then
            agree = lo - SHARE_SLACK <= here <= hi + SHARE_SLACK
            lines.append(
                f"{kernel} {label}: share {here:.1%} here ({threads} thread(s)), {f:.1%} [{lo:.1%}, {hi:.1%}] in "
                f"regions.json ({stored[kernel].get('threads')} thread(s))"
                + ("" if agree else ": they disagree, so the inputs, threads or machine differ from the profile's")
            )
    return lines


def held_to_bound(result: E2EResult, highest: dict[str, float | None]) -> None:
    """Each shape's realized fraction of its Amdahl bound; a flag where the speedup's whole interval lies above
    the bound fed with the micro intervals' upper ends (`highest`): more than the shares and the kernels allow."""
    for row in result.per_shape:
        label, bound, top = row["shape"], result.amdahl.get(row["shape"]), highest.get(row["shape"])
        result.realized[label] = (row["speedup"] - 1) / (bound - 1) if bound and bound > 1.0 + 1e-9 else None
        if top is not None and row["ci"][0] > top:
            result.flags.append(
                f"{label}: the model's speedup {row['speedup']:.2f}x [{row['ci'][0]:.2f}, {row['ci'][1]:.2f}] lies "
                f"above its Amdahl bound {top:.2f}x (micro speedups at their intervals' upper ends): "
                "not a gain to trust; "
                "likely the swapped model computes less, or the shares or micro numbers came from other inputs, "
                "threads or another machine"
            )


if __name__ == "__main__":
    child_main(sys.argv[1:])
