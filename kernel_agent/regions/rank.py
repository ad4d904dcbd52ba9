"""Each region's measured share of the forward pass, its headroom against this machine's ceilings, and the
model's Amdahl bounds.

How the share is timed: the captured ops are replayed in eager, in order, on the captured tensors, with a clock
read around every op; a round's share of a region is its ops' time over the round's total, and the median over
rounds has a bootstrap interval over rounds. Why a replay and not hooks: chains and horizontal groups are not
modules, and a replay times every region of every kind in the same rounds. Its overhead (two clock reads per
op) is measured with an empty call and taken off each op; the replay's total is shown beside the eager forward
so a replay that is not the model's time is seen. As for a verdict, the rounds are refused in one line when
other processes took the cores (`measure/contention.py`): then no share is reported, and problems are still
written.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from kernel_agent.measure.contention import contention, core_times
from kernel_agent.regions.records import Capture, Ref


@dataclass
class Timing:
    """Per label: each round's time per op (seconds), the replay's and the eager forward's median (seconds), and
    the refusal (None when the rounds count)."""

    label: str
    per_op: list[list[float]] = field(repr=False)
    replay_s: float
    eager_s: float
    refusal: str | None


def _fn(target: str) -> Any:
    namespace, op, overload = target.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


def _real(item: Any, env: dict[int, torch.Tensor]) -> Any:
    if isinstance(item, Ref):
        return env[item.value]
    if isinstance(item, (list, tuple)):
        return type(item)(_real(x, env) for x in item)
    if isinstance(item, dict):
        return {k: _real(v, env) for k, v in item.items()}
    return item


def time_capture(cap: Capture, model: torch.nn.Module, inputs: tuple, rounds: int) -> Timing:
    """Replay the capture `rounds` times (after one warm round) and time the eager forward as many times."""
    calls = [(_fn(op.target), op) for op in cap.ops if op.target.count(".") == 2]
    base = {v: t for v, t in cap.tensors.items() if cap.values[v].producer is None}
    clock = time.perf_counter

    def once() -> list[float]:
        env = dict(base)
        spent = [0.0] * len(cap.ops)
        for fn, op in calls:
            args, kwargs = _real(op.args, env), _real(op.kwargs, env)
            start = clock()
            result = fn(*args, **kwargs)
            spent[op.index] = clock() - start
            items = result if op.tuple_out else [result]
            for vid, item in zip(op.outputs, items):
                if vid is not None:
                    env[vid] = item
        return spent

    empty = []
    for _ in range(200):
        start = clock()
        empty.append(clock() - start)
    overhead = sorted(empty)[len(empty) // 2]
    cores = os.cpu_count() or 1
    with torch.no_grad():
        once()
        model(*inputs)
        before = core_times(None)
        per_op, eager = [], []
        for _ in range(rounds):
            per_op.append([max(0.0, t - overhead) for t in once()])
            start = clock()
            model(*inputs)
            eager.append(clock() - start)
        after = core_times(None)
    busy = contention(before, after, 0, cores).refusal()
    totals = sorted(sum(r) for r in per_op)
    return Timing(cap.label, per_op, totals[len(totals) // 2], sorted(eager)[len(eager) // 2], busy)


def share(timing: Timing, ops: set[int]) -> tuple[float, float, float]:
    """The median share of `ops` over rounds and a 95% bootstrap interval of that median (fixed seed)."""
    per_round = [sum(r[i] for i in ops) / max(sum(r), 1e-12) for r in timing.per_op]
    median = sorted(per_round)[len(per_round) // 2]
    rng = random.Random(0)
    meds = []
    for _ in range(1000):
        sample = sorted(rng.choice(per_round) for _ in per_round)
        meds.append(sample[len(sample) // 2])
    meds.sort()
    return median, meds[25], meds[974]


def seconds(timing: Timing, ops: set[int]) -> float:
    per_round = sorted(sum(r[i] for i in ops) for r in timing.per_op)
    return per_round[len(per_round) // 2]


def amdahl(f: float, s: float | None) -> float | None:
    """The model's speedup when a share `f` of it runs `s` times faster (s None: infinitely)."""
    if s is not None and s <= 0:
        return None
    rest = (1.0 - f) + (f / s if s else 0.0)
    return 1.0 / rest if rest > 1e-9 else None  # None: no bound (all of the time in regions made free)


def combined(fs: list[float], ss: list[float | None]) -> float | None:
    rest = max(1.0 - sum(fs), 0.0) + sum(f / s if s else 0.0 for f, s in zip(fs, ss))
    return 1.0 / rest if rest > 1e-9 else None
