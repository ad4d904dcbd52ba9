"""The model with and without the package's kernels: outputs compared, forward passes A/B-timed, share of time.

Why the same statistics as a verdict: an end-to-end number beside a micro one only means something when both
come from the same estimator, so the rounds here feed `timing/stats.py` `speedup_interval` (median ratio per
shape, geometric mean over shapes, round bootstrap widened by the between-process term) and the busy-machine rule
of `measure/contention.py`. Unlike a verdict this runs in one process, the user's, on the recipe's model: the
package's code was checked against its digests first, and this is where it runs.

Why the share: a kernel 3x faster in isolation that takes 5% of the model can buy at most 1/(0.95 + 0.05/3) =
1.03x (Amdahl). The share of each swapped layer is timed inside the unswapped model's forward (hooks around the
layer instances), so the bound printed beside the measured model speedup is this model's, at these shapes.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from kernel_agent.measure.contention import contention, core_times
from kernel_agent.timing.stats import SpeedupEstimate, calls_per_block, speedup_interval

TARGET_BLOCK_MS = 100.0  # one side's calls per block, as a verdict's requests per block (stats.calls_per_block)
SHARE_CALLS = 5  # forward passes whose hooked layer times give each layer's share


@dataclass(frozen=True)
class OutputCheck:
    """The swapped model's outputs against the unswapped model's, per shape: the largest errors, and whether every
    element holds |a - b| <= atol + rtol * |b|."""

    passed: bool
    max_abs: float
    max_rel: float
    where: str = ""


def outputs(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in outputs(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in outputs(v)]
    return []


def check_outputs(
    plain: torch.nn.Module, swapped: torch.nn.Module, inputs: dict[str, tuple], tolerance: tuple[float, float]
) -> OutputCheck:
    rtol, atol = tolerance
    worst_abs = worst_rel = 0.0
    with torch.no_grad():
        for label, args in inputs.items():
            want, got = outputs(plain(*args)), outputs(swapped(*args))
            if len(want) != len(got) or any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(got, want)):
                return OutputCheck(False, math.inf, math.inf, f"{label}: outputs differ in number, shape or dtype")
            for index, (a, b) in enumerate(zip(got, want)):
                diff = (a.double() - b.double()).abs()
                if not torch.isfinite(a).all() and torch.isfinite(b).all():
                    return OutputCheck(False, math.inf, math.inf, f"{label}: output {index} holds NaN or Inf")
                worst_abs = max(worst_abs, float(diff.max()) if diff.numel() else 0.0)
                scale = b.double().abs()
                worst_rel = max(worst_rel, float((diff / scale.clamp_min(1e-30)).max()) if diff.numel() else 0.0)
                if bool((diff > atol + rtol * scale).any()):
                    return OutputCheck(False, worst_abs, worst_rel, f"{label}: output {index} off by {worst_abs:.3g}")
    return OutputCheck(True, worst_abs, worst_rel)


PRECISION_MARGIN = 2.0  # the swapped model's error against float64, over the unswapped model's (the problems' rule)


@dataclass(frozen=True)
class PrecisionCheck:
    """The swapped and the unswapped model against a float64 run of the unswapped one: each one's worst relative
    norm error over every output and shape, and whether the swapped one's stays within PRECISION_MARGIN times the
    unswapped one's (floored at a few units of the outputs' rounding)."""

    passed: bool
    plain: float
    swapped: float
    where: str = ""


def _double(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.double() if value.is_floating_point() else value
    if isinstance(value, (tuple, list)):
        return type(value)(_double(v) for v in value)
    return value


def precision_check(plain: torch.nn.Module, swapped: torch.nn.Module, inputs: dict[str, tuple]) -> PrecisionCheck:
    """The problems' tolerance rule applied to the whole model: no worse than twice the unswapped model's own
    error against the model run in float64 (a kernel that computes in lower precision fails; one that rounds
    elsewhere passes)."""
    import copy

    gold_model = copy.deepcopy(plain).double()
    worst_plain = worst_swapped = 0.0
    where = ""
    with torch.no_grad():
        for label, args in inputs.items():
            gold = outputs(gold_model(*_double(args)))
            for index, (g, p, s) in enumerate(zip(gold, outputs(plain(*args)), outputs(swapped(*args)))):
                if not (g.is_floating_point() and g.numel()):
                    continue
                scale = float(torch.linalg.vector_norm(g))
                if scale == 0 or not math.isfinite(scale):
                    continue
                floor = 4 * torch.finfo(p.dtype).eps if p.is_floating_point() else 0.0
                e_p = float(torch.linalg.vector_norm(p.double() - g)) / scale
                e_s = float(torch.linalg.vector_norm(s.double() - g)) / scale
                worst_plain, worst_swapped = max(worst_plain, e_p), max(worst_swapped, e_s)
                if not e_s <= PRECISION_MARGIN * max(e_p, floor) and not where:
                    where = (
                        f"{label}: output {index} is off the float64 model by {e_s:.3g} (norm); the model, {e_p:.3g}"
                    )
    return PrecisionCheck(not where, worst_plain, worst_swapped, where)


def share_passes(
    model: torch.nn.Module, layers: dict[str, list[torch.nn.Module]], inputs: tuple, passes: int
) -> dict[str, list[float]]:
    """Per forward pass (after one warm pass), the time inside each kernel's module instances (`layers[kernel]`,
    hooks around each) over the pass's time. `regions` times a module region's share the same way."""
    spent: dict[str, float] = {}
    started: dict[int, float] = {}
    hooks = []

    def before(module: torch.nn.Module, _args: Any) -> None:
        started[id(module)] = time.perf_counter()

    def after(kernel: str):
        def hook(module: torch.nn.Module, _args: Any, _out: Any) -> None:
            spent[kernel] = spent.get(kernel, 0.0) + time.perf_counter() - started.pop(id(module))

        return hook

    for kernel, modules in layers.items():
        for m in modules:
            hooks += [m.register_forward_pre_hook(before), m.register_forward_hook(after(kernel))]
    found: dict[str, list[float]] = {k: [] for k in layers}
    try:
        with torch.no_grad():
            model(*inputs)  # warm
            for _ in range(passes):
                spent.clear()
                start = time.perf_counter()
                model(*inputs)
                total = time.perf_counter() - start
                for kernel in layers:
                    found[kernel].append(spent.get(kernel, 0.0) / total)
    finally:
        for h in hooks:
            h.remove()
    return found


def shares(model: torch.nn.Module, layers: dict[str, list[torch.nn.Module]], inputs: tuple) -> dict[str, float]:
    """Each kernel's share of one forward pass of the unswapped model: the median over SHARE_CALLS passes."""
    return {k: sorted(v)[len(v) // 2] for k, v in share_passes(model, layers, inputs, SHARE_CALLS).items()}


def amdahl(shares_by_kernel: dict[str, float], speedups: dict[str, float]) -> float | None:
    """The most the model can gain when each kernel's share of its time runs `speedups[kernel]` times faster."""
    if not shares_by_kernel or any(k not in speedups or speedups[k] <= 0 for k in shares_by_kernel):
        return None
    rest = 1.0 - sum(shares_by_kernel.values())
    return 1.0 / (max(rest, 0.0) + sum(f / speedups[k] for k, f in shares_by_kernel.items()))


@dataclass
class ModelTiming:
    """The forward pass timed A/B: the estimate over shapes (None when refused), per-shape labels, the reason."""

    estimate: SpeedupEstimate | None
    labels: list[str]
    rounds: int
    calls_per_block: list[int]
    refusal: str = ""
    contention: dict[str, float] = field(default_factory=dict)


def _time_block(model: torch.nn.Module, args: tuple, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        model(*args)
        times.append((time.perf_counter_ns() - start) / 1e6)
    return times


def time_models(plain: torch.nn.Module, swapped: torch.nn.Module, inputs: dict[str, tuple], rounds: int) -> ModelTiming:
    """Per round and shape, the two models take turns block by block (the one that goes first swaps every round),
    each call timed alone; the rounds give the speedup of the swapped model with a round-bootstrap interval."""
    labels = list(inputs)
    base: list[list[list[float]]] = [[] for _ in labels]
    cand: list[list[list[float]]] = [[] for _ in labels]
    with torch.no_grad():
        sizes = []
        for args in inputs.values():
            for model in (plain, swapped):
                model(*args)  # warm: first-call builds (a C++ kernel's gcc at load) stay out of the rounds
            start = time.perf_counter()
            plain(*args)
            sizes.append(calls_per_block((time.perf_counter() - start) * 1e3, TARGET_BLOCK_MS))
        before = core_times(None)
        for r in range(rounds):
            for s, args in enumerate(inputs.values()):
                order = [(plain, base), (swapped, cand)]
                for model, into in order if r % 2 == 0 else order[::-1]:
                    into[s].append(_time_block(model, args, sizes[s]))
        after = core_times(None)
    busy = contention(before, after, 0, os.cpu_count() or 1)
    refusal = busy.refusal() or ""
    estimate = None if refusal else speedup_interval(base, cand)
    return ModelTiming(estimate, labels, rounds, sizes, refusal, busy.to_json())
