"""CPU per wall second on the requests the speed is made of (kernel_agent/timing/cpu_use.py), and the guard on FAST
that reads it: a candidate that idles in some requests and burns a hidden core in the rest cannot dilute it."""

from __future__ import annotations

from kernel_agent.core.timing_result import Accounts, MedianCpu, SandboxAccount, SideRatios, Summary, TimingResult
from kernel_agent.core.verdict import Status
from kernel_agent.sandbox.host.session import Timed
from kernel_agent.timing.cpu_use import CpuUse, after_reply_cap, cpu_use, median_half, worst_shape
from kernel_agent.timing.decision import cpu_guard, decide

MS = 1_000_000


def request(wall_ms: float, cpu_per_wall: float) -> Timed:
    wall = int(wall_ms * MS)
    return Timed(wall_ms, [wall_ms], None, int(wall * cpu_per_wall), wall, wall, [])


def sleeper(every: int, n: int = 40) -> list[Timed]:
    """Sleeps 12 ms (no CPU) in every `every`-th request; the others take 4 ms on two cores."""
    return [request(12.0, 0.0) if i % every == every - 1 else request(4.0, 2.0) for i in range(n)]


def test_idle_requests_dilute_the_mean_but_not_the_median_half() -> None:
    for every in (3, 4, 8):
        requests = sleeper(every)
        mean = sum(t.cpu_ns for t in requests) / sum(t.wall_ns for t in requests)
        assert mean < 1.6  # every 4th: 0.8 over every request, under a one-thread budget
        used = cpu_use(requests)
        assert abs(used.per_wall - 2.0) < 1e-9, every
        assert all(t.wall_ns == 4 * MS for t in median_half(requests))


def test_sleeping_in_every_other_request_buys_no_median_and_no_dilution() -> None:
    """Half the requests idle: the median sits between the two kinds; the half at or below it are the burning
    ones, which is what the speed would be made of if it gained anything."""
    used = cpu_use(sleeper(2))
    assert used.requests == 20 and abs(used.per_wall - 2.0) < 1e-9


def test_an_honest_side_reads_the_same_on_its_median_half_as_over_every_request() -> None:
    honest = [request(5.0 + 0.1 * (i % 7), 0.97) for i in range(50)]
    assert abs(cpu_use(honest).per_wall - 0.97) < 1e-3


def test_the_worst_shape_is_judged_against_its_own_baseline_and_the_budget() -> None:
    base = [CpuUse(97, 100, 10), CpuUse(98, 100, 10)]
    only_one_shape = [CpuUse(99, 100, 10), CpuUse(190, 100, 10)]
    assert worst_shape(only_one_shape, base, threads=1) == 1
    assert worst_shape([CpuUse(0, 0, 0), CpuUse(0, 0, 0)], base, threads=1) is None


SIDE = Summary(1.0, 1.0, 1.0, 1.0, 1)
PINNED = SandboxAccount(method="/proc schedstat", cores="affinity 0")


def estimate(**more) -> TimingResult:
    fields = dict(
        speedup=1.55, speedup_ci=(1.45, 1.65), ci_level="95%", statistical_ci=(1.45, 1.65), process_effect=0.08,
        baseline=SIDE, candidate=SIDE, rounds=10, max_rounds=10, stopping=None, calls_per_block=[4],
        calls_per_request=[1], per_shape=[], audited_calls=4, record_floor_ms=[0.05], timed_inputs=[], clock="",
        threads=1, work_budget_exceeded=None, contention=None, accounting=Accounts(baseline=PINNED, candidate=PINNED),
    )  # fmt: skip
    return TimingResult(**{**fields, **more})


def test_the_guard_reads_the_median_half_where_the_record_has_it() -> None:
    """The wave's numbers: 0.40 over every request against the baseline's 0.96 passed; 1.9 on the median half
    does not, and the reason names the CPU and the shape."""
    diluted = SideRatios(baseline=0.96, candidate=0.40)
    assert decide(estimate(cpu_per_wall=diluted), [], 0.02, 10.0, []).status is Status.FASTER
    at_median = MedianCpu(shape=(256, 2048), dtype="float32", baseline=0.96, candidate=1.9)
    refused = decide(estimate(cpu_per_wall=diluted, cpu_at_median=at_median), [], 0.02, 10.0, [])
    assert refused.status is Status.CORRECT and "not accepted" in refused.reason
    assert "1.90 s of CPU per second" in refused.reason and "shape [256, 2048] float32" in refused.reason
    honest = MedianCpu(shape=(256, 2048), dtype="float32", baseline=0.96, candidate=0.98)
    assert cpu_guard(estimate(cpu_per_wall=diluted, cpu_at_median=honest)) is None


def test_the_median_record_round_trips_and_an_old_record_reads_without_it() -> None:
    at_median = MedianCpu(shape=(4, 8), dtype="float32", baseline=0.9, candidate=1.1)
    stored = estimate(cpu_at_median=at_median).to_json()
    assert stored["cpu_at_median"] == {"shape": [4, 8], "dtype": "float32", "baseline": 0.9, "candidate": 1.1}
    assert TimingResult.from_json(stored).cpu_at_median == at_median
    old = estimate().to_json()
    assert "cpu_at_median" not in old and TimingResult.from_json(old).cpu_at_median is None


def spinning(wall_ms: float, after_ms: float, threads: int) -> Timed:
    """An honest OpenMP request: `threads` cores busy through the call and on past the reply until the freeze."""
    wall, window = int(wall_ms * MS), int((wall_ms + after_ms) * MS)
    return Timed(wall_ms, [wall_ms], None, threads * window, window, wall, [])


def test_spin_past_the_reply_counts_up_to_twice_the_baselines_stretch_and_no_further() -> None:
    baseline = [spinning(4.0, 0.4, 1) for _ in range(20)]
    cap = after_reply_cap(baseline)
    assert cap == int(0.8 * MS)
    honest = [spinning(0.7, 0.4, 2) for _ in range(20)]  # cpp_matmul's faster at unshare, two threads
    assert cpu_use(honest).per_wall > 2.0 * 1.1  # judged to the reply alone: over its two threads, rejected
    assert abs(cpu_use(honest, cap).per_wall - 2.0) < 1e-9
    stuck = [spinning(0.7, 5.0, 2) for _ in range(20)]  # a thread holding the freeze off to run on unseen
    assert cpu_use(stuck, cap).per_wall > 2.0 * 1.1 * 3  # 11.4 ms of CPU per 1.5 ms counted
