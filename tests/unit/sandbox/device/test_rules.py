"""The device path's rules on recorded readings (DESIGN.md section 18): the quiet-device bound, foreign load from
delayed probes, throttling from clocks and NVML reasons, and device memory sized and refused before anything runs."""

from __future__ import annotations

from kernel_agent.core.verdict import RefusalKind, Status
from kernel_agent.problem.footprint import Footprint
from kernel_agent.sandbox.device.footprint import GIB, device_footprint, device_refusal, gold_on_device, per_request
from kernel_agent.sandbox.device.quiet import AfterReply, ProbeBaseline, Quiet, foreign_load, work_past_reply
from kernel_agent.sandbox.device.telemetry import DeviceState, read_state, recorded, throttled


def test_the_quiet_bound_is_learned_from_idle_probes_and_has_a_floor() -> None:
    idle = ProbeBaseline()
    assert idle.judge(5.0) is Quiet.UNKNOWN  # nothing learned: no verdict from one reading
    for ms in (0.008, 0.01, 0.012):
        idle.add(ms)
    assert idle.bound_ms() == 0.2  # 10 x 0.01 is under the floor
    assert work_past_reply(AfterReply(0.15), idle) is None
    assert "0.900 ms" in (work_past_reply(AfterReply(0.9), idle) or "")
    slow = ProbeBaseline([0.05, 0.05, 0.05])
    assert slow.bound_ms() == 0.5 and slow.judge(0.4) is Quiet.IDLE


def test_one_slow_idle_probe_is_jitter_a_tenth_is_a_load() -> None:
    idle = ProbeBaseline([0.01] * 3)
    assert foreign_load([], set(), [0.01] * 19 + [3.0], idle) is None
    assert "3 of 20 idle probes delayed" in (foreign_load([], set(), [0.01] * 17 + [3.0] * 3, idle) or "")


def state(sm: float, reasons: int | None = 0) -> DeviceState:
    return DeviceState(sm, 2619.0, 450.0, 60.0, reasons, "nvml")


def test_throttling_is_flagged_for_thermal_reasons_or_a_falling_clock_not_a_power_cap() -> None:
    assert throttled([state(1980), state(1980, 0x4)]) is None  # software power cap: recorded only
    assert "software power cap" in recorded([state(1980), state(1980, 0x4)])
    hot = throttled([state(1980), state(1975, 0x40)])
    assert hot == "the device throttled during timing (hardware thermal slowdown)"
    assert "fell from 1980 to 1500 MHz" in (throttled([state(1980), state(1500, None)]) or "")
    assert throttled([state(1980), state(1900, None)]) is None  # within 10%


def test_reading_the_device_never_raises_without_one() -> None:
    reading = read_state()
    assert reading.source in ("nvml", "torch", "none")
    if reading.source == "none":
        assert recorded([reading]).startswith("device clocks not read")


def test_device_memory_is_sized_and_refused_like_host_memory() -> None:
    assert per_request(100) == 6400 and per_request(GIB) == GIB and per_request(GIB // 4) == GIB
    fp = Footprint(inputs=4 * GIB, outputs=4 * GIB, parameters=0, temporaries=0)
    need = device_footprint(fp, item_bytes=4, l2_bytes=60 << 20)
    # 2 sides x (4 + 4) + kept inputs 4 + reference 4 + 3 contexts x 0.5 + the 120 MiB flush
    assert need.without_gold == 24 * GIB + 3 * (GIB // 2) + (120 << 20)
    assert need.gold == 2 * 8 * GIB  # float32 widened to float64
    refused = device_refusal(need, budget=20 * GIB, free=139 * GIB, described="x")
    assert refused is not None and refused.status is Status.REJECTED
    assert refused.refusal.kind is RefusalKind.TOO_LARGE and refused.refusal.memory == "device"
    assert "--device-memory-budget is 20.00 GB" in refused.reason
    assert device_refusal(need, budget=None, free=139 * GIB, described="x") is None
    assert gold_on_device(need, None, 139 * GIB) and not gold_on_device(need, 30 * GIB, 139 * GIB)


def test_nvml_pids_count_only_where_they_name_ours_too() -> None:
    idle = ProbeBaseline([0.01] * 3)
    assert "pid 99" in (foreign_load([10, 99], {10, 11}, [], idle) or "")
    assert foreign_load([7001, 7002], {10, 11}, [], idle) is None  # another pid namespace: none of ours is named
