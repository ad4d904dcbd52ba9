"""Whether `torch.compile` already fixes a region: the region's reference compiled by Inductor against the same
reference in eager, on the captured inputs, as a speedup over eager with an interval.

Why the reference and the captured inputs: that is the problem a kernel would be written for, at the shapes the
model runs; a region compile already makes fast is worth less of an engineer's time. Eager and compiled calls
alternate within a round so both see the same load; the speedup is the median of the rounds' ratios with a
seeded bootstrap interval, refused on a busy machine by the rule the shares use.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from kernel_agent.measure.contention import contention, core_times
from kernel_agent.problem.load import ProblemError, load_problem


@dataclass(frozen=True)
class CompileReading:
    """The compiled reference's speedup over eager (median, 95% interval), or why there is none."""

    speedup: float | None
    low: float | None
    high: float | None
    reason: str | None


def compile_speedup(folder: Path, inputs: list[torch.Tensor], rounds: int) -> CompileReading:
    try:
        problem = load_problem(folder)
    except ProblemError as exc:
        return CompileReading(None, None, None, f"does not load: {exc}")
    assert problem.module is not None
    eager = problem.module.reference
    try:
        compiled = torch.compile(eager, dynamic=False)
        with torch.no_grad():
            compiled(*inputs)  # compiles here, outside the clock
    except Exception as exc:  # noqa: BLE001 - any compile failure is a reading of its own, in one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return CompileReading(None, None, None, f"torch.compile failed: {first[:200]}")
    return _time(eager, compiled, inputs, rounds)


def _time(eager: Callable, compiled: Callable, inputs: list[torch.Tensor], rounds: int) -> CompileReading:
    clock = time.perf_counter
    ratios = []
    with torch.no_grad():
        eager(*inputs)
        before = core_times(None)
        for _ in range(rounds):
            start = clock()
            eager(*inputs)
            mid = clock()
            compiled(*inputs)
            end = clock()
            ratios.append((mid - start) / max(end - mid, 1e-12))
        after = core_times(None)
    busy = contention(before, after, 0, os.cpu_count() or 1).refusal()
    if busy is not None:
        return CompileReading(None, None, None, busy)
    ratios.sort()
    rng = random.Random(0)
    meds = sorted(sorted(rng.choice(ratios) for _ in ratios)[len(ratios) // 2] for _ in range(1000))
    return CompileReading(ratios[len(ratios) // 2], meds[25], meds[974], None)
