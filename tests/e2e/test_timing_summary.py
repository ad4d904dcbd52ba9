"""The per-side times shown in run tables agree with the speedup beside them."""

import pytest

from kernel_agent.measure.stats import speedup_interval, typical_ms


def test_typical_times_multiply_out_to_the_speedup_across_shapes() -> None:
    # Two shapes of very different size (like torch_attention): a pooled median would sit
    # between them and its ratio would not be the geometric-mean speedup.
    base = [[[10.0, 10.2, 9.9]] * 4, [[1.0, 1.02, 0.99]] * 4]
    cand = [[[5.0, 5.1, 4.9]] * 4, [[1.0, 1.01, 0.98]] * 4]
    estimate = speedup_interval(base, cand)
    timing = {"per_shape": estimate.per_shape}
    assert typical_ms(timing, "baseline") / typical_ms(timing, "candidate") == pytest.approx(estimate.speedup, rel=1e-9)
    assert estimate.baseline.median_ms / estimate.candidate.median_ms != pytest.approx(estimate.speedup, rel=0.05)


def test_typical_ms_refuses_incomplete_timings() -> None:
    assert typical_ms(None, "baseline") is None
    assert typical_ms({"per_shape": [{"baseline_median_ms": 1.0}, {"baseline_median_ms": 0}]}, "baseline") is None
    assert typical_ms({"per_shape": [{"candidate_median_ms": 2.0}]}, "baseline") is None
    assert typical_ms({"baseline": {"median_ms": 5.0}}, "baseline") == 5.0  # no per-shape entries: the overall median


def test_overlapping_timings_restore_the_thread_count() -> None:
    """Two timings on different devices can overlap in one orchestrator: neither may leave 1 behind.

    The second timing runs in a thread started while the first held the count at 1, so that
    thread's own count reads 1 when it enters; restoring that would leave every later thread at 1."""
    import threading

    import torch

    from kernel_agent.evaluate.ab_timing import _single_threaded

    before = torch.get_num_threads()
    assert before > 1, "needs a machine with at least 2 threads"
    first_in, first_may_leave, second_in, second_may_leave = (threading.Event() for _ in range(4))

    def first() -> None:
        with _single_threaded():
            first_in.set()
            first_may_leave.wait(10)

    def second() -> None:
        with _single_threaded():
            second_in.set()
            second_may_leave.wait(10)

    def threads_of_a_new_thread() -> int:
        seen: list[int] = []
        probe = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        probe.start()
        probe.join(10)
        return seen[0]

    one = threading.Thread(target=first)
    one.start()
    first_in.wait(10)
    two = threading.Thread(target=second)  # started while the count is 1
    two.start()
    second_in.wait(10)
    first_may_leave.set()  # the first leaves before the second
    one.join(10)
    second_may_leave.set()
    two.join(10)
    assert threads_of_a_new_thread() == before
