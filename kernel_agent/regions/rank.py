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

On CUDA (`time_capture_cuda`) a host clock would time launches, not kernels: the same replay runs on the device
under `torch.profiler` with CUDA activity, each op inside a named range, and an op's time is the device time of
the kernels its range launched (`device_rounds` does that arithmetic on the recorded ranges). A round's total is
the forward's device time, so a share is kernel time over kernel time; host gaps between launches are in
neither. The eager forward is profiled the same way beside it. No contention refusal there: other processes'
CPU use does not change how long a kernel runs on the device.
"""

from __future__ import annotations

import copy
import math
import os
import random
import time
from collections.abc import Iterable
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


def _real(item: Any, env: dict[int, torch.Tensor], device: torch.device | None = None) -> Any:
    """An op's argument with its tensors read from `env` (and, given `device`, its device arguments moved
    there: a captured `arange(..., device=cpu)` must make its tensor beside the others)."""
    if isinstance(item, Ref):
        return env[item.value]
    if device is not None and isinstance(item, torch.device):
        return device
    if isinstance(item, (list, tuple)):
        return type(item)(_real(x, env, device) for x in item)
    if isinstance(item, dict):
        return {k: _real(v, env, device) for k, v in item.items()}
    return item


def _moved(item: Any, device: torch.device) -> Any:
    if isinstance(item, torch.Tensor):
        return item.to(device)
    if isinstance(item, (list, tuple)):
        return type(item)(_moved(x, device) for x in item)
    if isinstance(item, dict):
        return {k: _moved(v, device) for k, v in item.items()}
    return item


# The busy-machine rule reads the kernel's CPU counters, which tick every 10 ms: a window of a few ticks (20
# rounds of a 0.5 ms forward) reads one stray tick as a busy machine. Each round repeats its replay and forward
# often enough that the rounds together last about this long.
MIN_WINDOW_S = 1.0


def time_capture(cap: Capture, model: torch.nn.Module, inputs: tuple, rounds: int) -> Timing:
    """Replay the capture `rounds` times (after one warm round) and time the eager forward as many times; a
    round is the mean of as many replays and forwards as make the rounds last MIN_WINDOW_S."""
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
        start = clock()
        once()
        model(*inputs)
        repeats = max(1, math.ceil(MIN_WINDOW_S / max(rounds * (clock() - start), 1e-9)))
        before = core_times(None)
        per_op, eager = [], []
        for _ in range(rounds):
            spent = [0.0] * len(cap.ops)
            forward = 0.0
            for _ in range(repeats):  # a round of `repeats` replays and forwards: their means
                for i, t in enumerate(once()):
                    spent[i] += max(0.0, t - overhead) / repeats
                start = clock()
                model(*inputs)
                forward += (clock() - start) / repeats
            per_op.append(spent)
            eager.append(forward)
        after = core_times(None)
    busy = contention(before, after, 0, cores).refusal()
    totals = sorted(sum(r) for r in per_op)
    replay, forward = totals[len(totals) // 2], sorted(eager)[len(eager) // 2]
    # A replayed op goes through its OpOverload, a few microseconds slower per call than the model's own call:
    # left in, a region of many small ops would read a larger share than it costs the model. What the replay
    # takes beyond the eager forward is spread evenly over the calls and taken off each.
    extra = max(0.0, (replay - forward) / max(len(calls), 1))
    if extra:
        per_op = [[max(0.0, t - extra) if t else 0.0 for t in r] for r in per_op]
    return Timing(cap.label, per_op, replay, forward, busy)


OP_RANGE = "ka.op"  # the profiler range around one replayed op: ka.op.ROUND.INDEX
EAGER_RANGE = "ka.eager"  # around one eager forward: ka.eager.ROUND


def time_capture_cuda(cap: Capture, model: torch.nn.Module, inputs: tuple, rounds: int) -> Timing:
    """Replay the capture on the CUDA device `rounds` times (after one warm round) under the profiler, and the
    eager forward as many times; per op and per forward, the device time of the kernels they launched."""
    from torch.profiler import ProfilerActivity, profile, record_function

    device = torch.device("cuda")
    calls = [(_fn(op.target), op) for op in cap.ops if op.target.count(".") == 2]
    base = {v: t.to(device) for v, t in cap.tensors.items() if cap.values[v].producer is None}
    on_device, moved = copy.deepcopy(model).to(device), _moved(tuple(inputs), device)

    def once(round_: int | None) -> None:
        env = dict(base)
        for fn, op in calls:
            args, kwargs = _real(op.args, env, device), _real(op.kwargs, env, device)
            if round_ is None:
                result = fn(*args, **kwargs)
            else:
                with record_function(f"{OP_RANGE}.{round_}.{op.index}"):
                    result = fn(*args, **kwargs)
            items = result if op.tuple_out else [result]
            for vid, item in zip(op.outputs, items):
                if vid is not None:
                    env[vid] = item

    with torch.no_grad():
        once(None)
        on_device(*moved)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for r in range(rounds):
                once(r)
                with record_function(f"{EAGER_RANGE}.{r}"):
                    on_device(*moved)
            torch.cuda.synchronize()
    per_op, eager = device_rounds(_ranges(prof.events()), rounds, len(cap.ops))
    totals = sorted(sum(r) for r in per_op)
    none = "the profiler recorded no kernel time (is CUPTI available to torch.profiler?)" if not totals[-1] else None
    return Timing(cap.label, per_op, totals[len(totals) // 2], sorted(eager)[len(eager) // 2], none)


def _ranges(events: Iterable[Any]) -> Iterable[tuple[str, float]]:
    """(range name, device microseconds) of this module's ranges: their host-side events, whose device time
    counts the kernels launched by everything inside them (the device-side copies of a range are skipped)."""
    from torch.autograd import DeviceType

    for ev in events:
        if ev.name.startswith("ka.") and ev.device_type == DeviceType.CPU:
            yield ev.name, float(getattr(ev, "device_time_total", 0.0))


def device_rounds(
    ranges: Iterable[tuple[str, float]], rounds: int, n_ops: int
) -> tuple[list[list[float]], list[float]]:
    """From the recorded ranges (name, device microseconds): each round's device seconds per op, and each eager
    forward's device seconds. A range seen twice adds up; an op with no range (not replayed) reads 0."""
    per_op = [[0.0] * n_ops for _ in range(rounds)]
    eager = [0.0] * rounds
    for name, micros in ranges:
        parts = name.split(".")
        if name.startswith(OP_RANGE + ".") and len(parts) == 4:
            per_op[int(parts[2])][int(parts[3])] += micros * 1e-6
        elif name.startswith(EAGER_RANGE + ".") and len(parts) == 3:
            eager[int(parts[2])] += micros * 1e-6
    return per_op, eager


def share(timing: Timing, ops: set[int]) -> tuple[float, float, float]:
    """The median share of `ops` over rounds and a 95% bootstrap interval of that median (fixed seed)."""
    return median_interval([sum(r[i] for i in ops) / max(sum(r), 1e-12) for r in timing.per_op])


def hook_share(model: torch.nn.Module, modules: list[torch.nn.Module], inputs: tuple, rounds: int) -> tuple:
    """A module region's share measured in the model itself: the time inside its instances (hooks around each)
    over the eager forward's, per pass, as `e2e` measures it. Why beside the replay's: a replayed op goes through
    its OpOverload, so a region of many small ops reads more in the replay than it costs the model (measured on a
    planted hot spot: tests/e2e/test_regions_loop.py)."""
    from kernel_agent.prove.model_ab import share_passes

    return median_interval(share_passes(model, {"region": modules}, inputs, rounds)["region"])


def median_interval(per_round: list[float]) -> tuple[float, float, float]:
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
