"""The device path's handshake (DESIGN.md section 18) through a fake transport (see fake_transport.py for why):
trusted buffers seen by the worker's views, fills only while frozen and once per call, outputs held to the
expected before they are opened, and the quiet-device rule deciding on recorded probe latencies."""

from __future__ import annotations

import pytest
import torch

from kernel_agent.core.verdict import Status
from kernel_agent.sandbox.device.buffers import OrderError
from kernel_agent.sandbox.device.exchange import DeviceExchange, DeviceParts
from kernel_agent.sandbox.device.outputs import DeviceFailure
from kernel_agent.sandbox.device.transport import TensorSpec
from kernel_agent.sandbox.inside.device_worker import WrongDevice, export_all, open_inputs

from .fake_transport import FakeTransport

SPEC = [[TensorSpec((4, 8), "float32")], [TensorSpec((4, 8), "float32")]]  # a request of two calls, one input each


def exchange(probes: list[float]) -> tuple[DeviceExchange, FakeTransport, list[int]]:
    transport, flushes = FakeTransport(), []
    readings = iter(probes)
    parts = DeviceParts(transport, probe=lambda: next(readings), flush=lambda: flushes.append(1))
    return DeviceExchange(parts), transport, flushes


def learned(ex: DeviceExchange) -> None:
    for _ in range(3):
        ex.idle_probe()


def test_the_worker_sees_each_fill_through_the_views_it_opened_once() -> None:
    ex, transport, flushes = exchange([0.01] * 3 + [0.01] * 4)
    learned(ex)
    views = open_inputs(transport, ex.stage("candidate", "0", SPEC))
    first = [[torch.randn(4, 8)], [torch.randn(4, 8)]]
    ex.before_request("candidate", "0", first, frozen=True)
    assert all(torch.equal(v[0], s[0]) for v, s in zip(views, first))
    views[0][0].zero_()  # the kernel scribbles on its input: what the trusted side kept as placed is untouched
    placed = ex.after_reply("candidate", "0", frozen=True)
    assert torch.equal(placed[0][0], first[0][0]) and not torch.equal(placed[0][0], views[0][0])
    assert torch.equal(ex.buffers("candidate", "0")[0][0], views[0][0])  # the audit reads the scribble
    second = [[torch.randn(4, 8)], [torch.randn(4, 8)]]
    ex.before_request("candidate", "0", second, frozen=True)
    assert torch.equal(views[1][0], second[1][0]) and len(flushes) == 2 and transport.syncs == 2


def test_fills_only_while_frozen_and_once_per_call() -> None:
    ex, _, _ = exchange([0.01] * 10)
    learned(ex)
    ex.stage("baseline", "0", SPEC)
    sets = [[torch.ones(4, 8)], [torch.ones(4, 8)]]
    with pytest.raises(OrderError, match="while the worker runs"):
        ex.before_request("baseline", "0", sets, frozen=False)
    ex.before_request("baseline", "0", sets, frozen=True)
    with pytest.raises(OrderError, match="twice"):
        ex.before_request("baseline", "0", sets, frozen=True)
    ex.after_reply("baseline", "0", frozen=True)
    with pytest.raises(OrderError, match="not placed"):
        ex.after_reply("baseline", "0", frozen=True)


def test_each_side_has_its_own_buffers() -> None:
    ex, transport, _ = exchange([0.01] * 10)
    cand = open_inputs(transport, ex.stage("candidate", "0", SPEC))
    base = open_inputs(transport, ex.stage("baseline", "0", SPEC))
    assert cand[0][0].data_ptr() != base[0][0].data_ptr()


def test_work_past_the_reply_is_rejected_and_so_is_work_found_before_the_next_call() -> None:
    ex, _, _ = exchange([0.01, 0.012, 0.011, 0.01, 1.5])
    learned(ex)
    ex.stage("candidate", "0", SPEC)
    ex.before_request("candidate", "0", [[torch.ones(4, 8)], [torch.ones(4, 8)]], frozen=True)
    with pytest.raises(DeviceFailure, match="still running on the device after the reply") as caught:
        ex.after_reply("candidate", "0", frozen=True)
    assert caught.value.status is Status.REJECTED
    ex2, _, _ = exchange([0.01, 0.012, 0.011, 0.01, 0.01, 2.0])
    learned(ex2)
    ex2.stage("candidate", "0", SPEC)
    ex2.stage("baseline", "0", SPEC)
    ex2.before_request("candidate", "0", [[torch.ones(4, 8)], [torch.ones(4, 8)]], frozen=True)
    ex2.after_reply("candidate", "0", frozen=True)  # quiet at the reply: a graph replayed later wakes up after
    with pytest.raises(DeviceFailure, match="candidate: .*before the next call"):
        ex2.before_request("baseline", "0", [[torch.ones(4, 8)], [torch.ones(4, 8)]], frozen=True)


def test_outputs_are_held_to_the_expected_before_they_are_opened() -> None:
    ex, transport, _ = exchange([])
    out = torch.arange(32.0).reshape(4, 8)
    described = export_all(transport, [out], "cpu")
    opened = ex.open(described, [((4, 8), "float32")], frozen=True)
    assert torch.equal(opened[0], out)
    cases = {
        "shape": ([((8, 4), "float32")], Status.INCORRECT, "shape"),
        "dtype": ([((4, 8), "float16")], Status.INCORRECT, "dtype"),
        "count": ([((4, 8), "float32")] * 2, Status.INCORRECT, "returned 1 output"),
    }
    for expected, status, words in cases.values():
        with pytest.raises(DeviceFailure, match=words) as caught:
            ex.open(described, expected, frozen=True)
        assert caught.value.status is status
    with pytest.raises(RuntimeError, match="while the worker runs"):
        ex.open(described, [((4, 8), "float32")], frozen=False)


@pytest.mark.parametrize(
    ("forge", "status", "words"),
    [
        ({"strides": [64, 1]}, Status.REJECTED, "reaches past its storage"),
        ({"storage_bytes": 1 << 40}, Status.REJECTED, "read bound"),
        ({"ipc": "f" * 64}, Status.INCORRECT, "unopenable"),
        ({"shape": [4, "8"]}, Status.REJECTED, "protocol violation"),
        ({"dtype": "complex32"}, Status.REJECTED, "unknown dtype"),
        ({"extra": "x" * 5000}, Status.REJECTED, "short string"),
        ({"surprise": 1}, Status.REJECTED, "exactly its fields"),
    ],
)
def test_a_forged_handle_is_the_candidates_verdict(forge: dict, status: Status, words: str) -> None:
    ex, transport, _ = exchange([])
    described = export_all(transport, [torch.zeros(4, 8)], "cpu")
    described[0] = {**described[0], **forge}
    with pytest.raises(DeviceFailure, match=words) as caught:
        ex.open(described, [((4, 8), "float32")], frozen=True)
    assert caught.value.status is status


def test_a_handle_claiming_more_than_its_allocation_maps_is_refused() -> None:
    ex, transport, _ = exchange([])
    big = torch.zeros(4, 16)
    described = export_all(transport, [big[:, :8]], "cpu")
    transport.mapped_bytes = lambda tensor: 64  # the driver says the allocation is smaller than claimed
    with pytest.raises(DeviceFailure, match="more bytes than its allocation"):
        ex.open(described, [((4, 8), "float32")], frozen=True)


def test_an_output_on_the_wrong_device_is_incorrect() -> None:
    with pytest.raises(WrongDevice, match="on cpu, expected cuda") as caught:
        export_all(FakeTransport(), [torch.zeros(2)], "cuda")
    assert caught.value.status is Status.INCORRECT


def test_a_second_process_on_the_device_is_named() -> None:
    transport = FakeTransport()
    probes = iter([0.01, 0.011, 0.012] + [0.01] * 20)
    parts = DeviceParts(transport, probe=lambda: next(probes), flush=lambda: None, compute_pids=lambda: [10, 11, 99])
    ex = DeviceExchange(parts)
    learned(ex)
    assert ex.busy({10, 11}) == "the device was busy with another process (pid 99)"
    assert ex.busy({10, 11, 99}) is None


def test_closing_unmaps_everything_and_drops_the_buffers() -> None:
    ex, transport, _ = exchange([])
    ex.stage("candidate", "0", SPEC)
    assert transport.shared and ex.sides
    ex.close()
    assert not transport.shared and not ex.sides


def test_a_new_worker_of_the_same_side_restarts_the_cycle_on_the_same_buffers() -> None:
    ex, transport, _ = exchange([0.01] * 10)
    learned(ex)
    first = ex.stage("candidate", "layout", SPEC)
    ex.before_request("candidate", "layout", [[torch.ones(4, 8)], [torch.ones(4, 8)]], frozen=True)
    # the worker died mid-request; a confirmation's fresh worker stages the same layout
    assert ex.stage("candidate", "layout", SPEC) == first
    ex.before_request("candidate", "layout", [[torch.zeros(4, 8)], [torch.zeros(4, 8)]], frozen=True)


def test_throttling_seen_between_blocks_is_a_timing_flag_with_the_readings() -> None:
    from kernel_agent.sandbox.device.telemetry import DeviceState

    readings = iter(
        [DeviceState(1980.0, 2619.0, 500.0, 70.0, 0, "nvml")] * 3
        + [DeviceState(1400.0, 2619.0, 700.0, 92.0, 0x40, "nvml")]
    )
    probes = iter([0.01] * 4)
    parts = DeviceParts(
        FakeTransport(), probe=lambda: next(probes), flush=lambda: None, read_state=lambda: next(readings)
    )
    ex = DeviceExchange(parts)
    learned(ex)
    assert ex.flags() == []
    ex.idle_probe()
    (flag,) = ex.flags()
    assert flag.startswith("the device throttled during timing (hardware thermal slowdown)") and "92 C max" in flag
