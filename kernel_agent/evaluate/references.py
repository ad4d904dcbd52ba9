"""Reference points: what torch gives for free, timed exactly like a candidate (DESIGN.md section 12).

A reference point is the problem's own reference run as a kernel: `eager` (a native problem's
`reference` in its own dtype; a KernelBench file's `Model`) and `compile` (the same through
`torch.compile`, inductor, default mode). Each is a trusted source generated here from the
problem's own files and nothing else, evaluated by `evaluate()` against the baseline: the same
check plan, fresh inputs every call, the same cores and the same A/B alternation as any candidate.
No candidate code is involved, and the worker sees the problem only through this generated text
(the problem's folder stays masked, as for a candidate).

`torch.compile` compiles lazily, at the first call of each new shape: that happens in the check
phase, which is before the warm-up and never part of a timing. `compile_s` records that phase
(the checks themselves are a small part of it; an eager point's `compile_s` shows how small).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from kernel_agent.core.config import ProfileWhen
from kernel_agent.core.of_record import typical_ms
from kernel_agent.core.reference_point import COMPILE_MODES, KINDS, Reference, ReferenceKind, ReferencePoint
from kernel_agent.core.verdict import Verdict
from kernel_agent.problem.load import Problem


def references(compile_modes: list[str] | tuple[str, ...] = ()) -> tuple[Reference, ...]:
    """eager and compile, then one point per extra compile mode (unknown modes: ValueError, naming the known ones)."""
    extra = []
    for mode in compile_modes:
        if mode not in COMPILE_MODES:
            raise ValueError(f"unknown torch.compile mode {mode!r}: one of {', '.join(COMPILE_MODES)}")
        if mode != "default" and mode not in extra:
            extra.append(mode)
    return KINDS + tuple(Reference(ReferenceKind.COMPILE, mode) for mode in extra)


# `dynamic=False`: every shape gets its own specialised graph, as a deployment at fixed shapes compiles it. The check
# plan calls many shapes before the benchmark ones, so with automatic dynamic shapes the timed shapes would run a
# symbolic-shape graph (and its outputs carry dynamo's per-instance attributes, which the worker refuses). Dynamo's
# default of 8 graphs per function would send the later shapes, the benchmark ones among them, back to eager.
RECOMPILE_LIMIT = 64


def _compile_args(ref: Reference) -> str:
    return "dynamic=False" + (f", mode={ref.mode!r}" if ref.mode else "")


# tqdm (transformers brings it) gives inductor a progress bar whose monitor thread the worker refuses
QUIET_TQDM = (
    "try:\n    import tqdm as _ka_tqdm\n\n    _ka_tqdm.tqdm.monitor_interval = 0\nexcept ImportError:\n    pass\n"
)


def _native_trailer(ref: Reference) -> str:
    if ref.kind is ReferenceKind.EAGER:
        return (
            "\n\n# ---- kernel-agent: the problem's own reference as the kernel (a trusted reference point) ----\n"
            "def kernel(*inputs):\n"
            "    return reference(*inputs)\n"
        )
    return (
        "\n\n# ---- kernel-agent: torch.compile of the problem's own reference (a trusted reference point) ----\n"
        "import torch as _ka_torch\n\n" + QUIET_TQDM + f"_ka_torch._dynamo.config.recompile_limit = {RECOMPILE_LIMIT}\n"
        f"_ka_compiled = _ka_torch.compile(reference, {_compile_args(ref)})\n\n\n"
        "def kernel(*inputs):\n"
        "    return _ka_compiled(*inputs)\n"
    )


# A KernelBench candidate is `ModelNew`, built with the reference's weights (load_state_dict, strict). A factory
# keeps the state dict's keys: `torch.compile(model)` would prefix them with `_orig_mod.`.
def _kernelbench_trailer(ref: Reference) -> str:
    if ref.kind is ReferenceKind.EAGER:
        return "\n\nModelNew = Model\n"
    return (
        "\n\n# ---- kernel-agent: torch.compile of the Model's forward (a trusted reference point) ----\n"
        "import torch as _ka_torch\n\n"
        + QUIET_TQDM
        + f"_ka_torch._dynamo.config.recompile_limit = {RECOMPILE_LIMIT}\n\n\n"
        "def ModelNew(*args):\n"
        "    model = Model(*args)\n"
        f"    model.forward = _ka_torch.compile(model.forward, {_compile_args(ref)})\n"
        "    return model\n"
    )


def reference_source(problem: Problem, kind: Reference) -> str:
    """The trusted kernel module of one reference point: the problem's own file and a generated entry point."""
    trailer = _kernelbench_trailer if problem.kind == "kernelbench" else _native_trailer
    return problem.reference_source.rstrip("\n") + "\n" + trailer(kind)


def point_of(kind: Reference, verdict: Verdict) -> ReferencePoint:
    """A reference's verdict as a point: its speedup when it verified and was timed, else its status and reason."""
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    compile_s = verdict.durations.get("verification")
    if not verdict.passed or verdict.speedup is None or not verdict.speedup_ci:
        reason = verdict.reason or verdict.status
        if verdict.passed:
            reason = f"not timed: {reason}"
        return ReferencePoint(kind, verdict.status, reason=first_line(reason), compile_s=compile_s, measured_at=now)
    low, high = verdict.speedup_ci
    return ReferencePoint(
        kind,
        verdict.status,
        speedup=verdict.speedup,
        ci=(low, high),
        reference_ms=typical_ms(verdict.timing, "candidate"),
        baseline_ms=typical_ms(verdict.timing, "baseline"),
        compile_s=compile_s,
        measured_at=now,
    )


def first_line(text: str, limit: int = 300) -> str:
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line[:limit]


@dataclass(frozen=True)
class ReferenceJob:
    """What to evaluate for one reference point: `evaluate(job.problem, job.source, job.options)`."""

    kind: Reference
    problem: Problem
    source: str
    options: Any  # evaluate.pipeline.EvalOptions


def reference_job(problem: Problem, kind: Reference, options: Any) -> ReferenceJob:
    """A reference point evaluated as a candidate is, with the torch backend (the problem file's text must not
    pick another) and no profile, on the benchmark shapes only: the reference is trusted, and each odd check
    shape would cost inductor a compile (seconds on two cores) for nothing the speedup uses. Every timed
    shape is still checked first, as the timed-output audit needs. Always every round: a point is measured
    once and divides every later speedup, and an early stop's 99.9% interval (cpp_cross_entropy's 4.41x eager
    point, stopped at round 4, read [1.95, 10.0]) made the demo's `vs eager` intervals span 1 for kernels 2-3x
    faster than eager."""
    return ReferenceJob(
        kind,
        replace(problem, check_shapes=[]),
        reference_source(problem, kind),
        replace(
            options, backend="torch", profile=ProfileWhen.NEVER, sequential=False, trusted_source=True, second_look=1
        ),
    )
