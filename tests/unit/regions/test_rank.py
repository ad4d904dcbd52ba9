"""The Amdahl bounds, the share of a region over timed rounds, and the CUDA shares' arithmetic on a recorded
profile (no GPU needed: the events are built as the profiler builds them)."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import DeviceType
from torch.autograd.profiler_util import FunctionEvent

from kernel_agent.regions.rank import Timing, _ranges, _real, amdahl, combined, device_rounds, share
from kernel_agent.regions.records import Ref


def test_amdahl_at_two_at_a_speedup_and_at_infinity() -> None:
    assert amdahl(0.5, 2.0) == pytest.approx(1 / 0.75)
    assert amdahl(0.5, None) == pytest.approx(2.0)
    assert amdahl(0.2, 1.0) == pytest.approx(1.0)
    assert amdahl(1.0, None) is None  # all of the time made free: no finite bound
    assert combined([0.3, 0.2], [2.0, 4.0]) == pytest.approx(1 / (0.5 + 0.15 + 0.05))
    assert combined([0.6, 0.5], [None, None]) is None  # noisy medians summing past 1 do not divide by zero


def test_share_is_the_median_over_rounds_with_an_interval_around_it() -> None:
    rounds = [[1.0, 1.0, 2.0], [1.0, 2.0, 1.0], [1.0, 1.0, 1.0], [2.0, 1.0, 1.0], [1.0, 1.0, 2.0]]
    timing = Timing("x", rounds, 4.0, 4.0, None)
    f, lo, hi = share(timing, {2})
    assert f == pytest.approx(1 / 3)  # op 2's share per round: .5, .25, .33, .25, .5
    assert 0.25 <= lo <= f <= hi <= 0.5
    assert share(timing, {0, 1, 2})[:1] == (1.0,)


def _event(name: str, kernels_us: list[float], device: DeviceType = DeviceType.CPU) -> FunctionEvent:
    """A profiler event as `torch.profiler` records one on a CUDA machine: a host-side range whose kernels hang
    off an aten child (the launch), so its device time is torch's own sum over children."""
    outer = FunctionEvent(0, name, 0, 0, 10, use_device="cuda", device_type=device)
    if device == DeviceType.CPU:
        child = FunctionEvent(1, "aten::mm", 0, 1, 9, use_device="cuda")
        for us in kernels_us:
            child.append_kernel("gemm", 0, us)
        outer.append_cpu_child(child)
    return outer


def test_device_rounds_take_each_ranges_kernel_time_and_skip_the_device_side_copies() -> None:
    events = [
        _event("ka.op.0.0", [10.0]),
        _event("ka.op.0.2", [20.0, 10.0]),  # two kernels from one op
        _event("ka.op.0.2", [30.0], DeviceType.CUDA),  # the range's device-side copy: not counted again
        _event("ka.eager.0", [45.0]),
        _event("ka.op.1.0", [10.0]),
        _event("ka.op.1.2", [10.0]),
        _event("ka.eager.1", [25.0]),
        _event("aten::mm", [99.0]),  # outside every range of ours
    ]
    per_op, eager = device_rounds(_ranges(events), rounds=2, n_ops=3)
    assert per_op[0] == pytest.approx([10e-6, 0.0, 30e-6]) and per_op[1] == pytest.approx([10e-6, 0.0, 10e-6])
    assert eager == pytest.approx([45e-6, 25e-6])
    timing = Timing("x", per_op, 30e-6, 35e-6, None)
    f, lo, hi = share(timing, {2})  # kernel time over the forward's kernel time: 0.75 and 0.5
    assert f == pytest.approx(0.75) and lo == pytest.approx(0.5) and hi == pytest.approx(0.75)


def test_a_cpu_op_argument_moves_to_the_timing_device() -> None:
    env = {0: torch.ones(2)}
    args = (Ref(0), [torch.device("cpu"), 3], {"device": torch.device("cpu")})
    moved = _real(args, env, torch.device("meta"))
    assert moved[0] is env[0] and moved[1] == [torch.device("meta"), 3] and moved[2]["device"].type == "meta"
    assert _real(args, env)[2]["device"].type == "cpu"  # the CPU replay keeps what was captured
