"""The share of the timing cores other processes took (measure/contention.py), on snapshots."""

from __future__ import annotations

from kernel_agent.measure.contention import CONTENTION_LIMIT, CoreTimes, contention, core_times

SECOND = 1_000_000_000


def test_busy_time_that_was_neither_the_sandboxes_nor_ours_is_other_processes() -> None:
    before = CoreTimes(busy_ns=0, steal_ns=0, own_ns=0, at_ns=0)
    after = CoreTimes(busy_ns=2 * SECOND // 2, steal_ns=0, own_ns=SECOND // 10, at_ns=2 * SECOND)
    busy = contention(before, after, sandboxes_ns=SECOND // 2, cores=1)
    assert abs(busy.other - 0.2) < 1e-9 and busy.refusal() is None  # 1 s busy = 0.5 sandboxes + 0.1 ours + 0.4
    loaded = contention(before, CoreTimes(2 * SECOND, 0, 0, 2 * SECOND), sandboxes_ns=SECOND // 2, cores=1)
    assert loaded.other == 0.75 and "75% of the timing cores' time went to other processes" in loaded.refusal()


def test_stolen_time_is_its_own_reason_and_quiet_cores_pass() -> None:
    stolen = contention(CoreTimes(0, 0, 0, 0), CoreTimes(0, SECOND, 0, 2 * SECOND), 0, cores=1)
    assert stolen.stolen == 0.5 > CONTENTION_LIMIT and "hypervisor took 50%" in stolen.refusal()
    quiet = contention(CoreTimes(0, 0, 0, 0), CoreTimes(SECOND, 0, 0, SECOND), SECOND, cores=1)
    assert quiet.other == 0.0 and quiet.refusal() is None


def test_a_snapshot_reads_this_machine() -> None:
    first, second = core_times(None), core_times({0})
    assert first.busy_ns >= second.busy_ns >= 0 and first.at_ns <= second.at_ns
