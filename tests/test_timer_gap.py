"""The trusted-clock corroboration on block records shaped like real runs (no processes).

The numbers mirror what the 2-core CI machine recorded: 10 calls per block, a baseline
around 2.5 ms per call, IPC overhead of tens of microseconds per call with some jitter.
"""

import numpy as np

from kernel_agent.measure import _timer_gap

CALLS = 10
BLOCKS = 4


def blocks(per_call_ms: float, hidden_ms: float, jitter_ms: float, seed: int) -> tuple[list[float], list[float]]:
    """(claimed, unexplained) ms per block for a side claiming `per_call_ms` and hiding `hidden_ms`."""
    rng = np.random.default_rng(seed)
    claimed = [CALLS * per_call_ms * (1 + 0.03 * rng.standard_normal()) for _ in range(BLOCKS)]
    unexplained = [CALLS * (hidden_ms + abs(jitter_ms * rng.standard_normal())) for _ in range(BLOCKS)]
    return claimed, unexplained


def gap(base: tuple[list[float], list[float]], cand: tuple[list[float], list[float]]) -> str | None:
    claimed = {"baseline": base[0], "candidate": cand[0]}
    unexplained = {"baseline": base[1], "candidate": cand[1]}
    return _timer_gap(unexplained, claimed, [CALLS] * BLOCKS)


def test_forger_whose_real_speed_beats_the_baseline_is_still_rejected() -> None:
    """CI saw this: a worker impersonator claimed 2.45x where the trusted clock saw 1.37x (it
    hid 44% of its time, and its real speed beat the loaded baseline's by 1.37x); that was
    only flagged before the per-block route existed."""
    for seed in range(20):
        real_ms = 2.5 / 1.40
        claim_ms = real_ms / 1.79
        verdict = gap(blocks(2.5, 0.05, 0.02, seed), blocks(claim_ms, 0.05 + real_ms - claim_ms, 0.02, seed + 100))
        assert verdict is not None and verdict.startswith("timer mismatch"), verdict


def test_forger_at_the_baselines_speed_is_rejected() -> None:
    verdict = gap(blocks(2.5, 0.05, 0.02, 1), blocks(1.25, 1.30, 0.02, 2))
    assert verdict is not None and verdict.startswith("timer mismatch")


def test_honest_candidates_are_not_rejected() -> None:
    for seed in range(50):
        # a fast honest kernel: its blocks are short, so IPC jitter per call is large
        fast = gap(blocks(2.5, 0.05, 0.04, seed), blocks(0.35, 0.05, 0.08, seed + 1000))
        assert fast is None or fast.startswith("FLAG:"), fast
        # the baseline against itself
        same = gap(blocks(2.5, 0.05, 0.04, seed), blocks(2.5, 0.05, 0.04, seed + 2000))
        assert same is None or same.startswith("FLAG:"), same


def test_honest_harness_overhead_differences_are_not_rejected() -> None:
    """CI saw this honest candidate (torch.softmax, 0.58 ms) spend 0.15-0.3 ms more per call outside its
    timer than the 1.7 ms baseline, in every block: a difference of harness overhead, not a forgery."""
    for seed in range(50):
        for extra in (0.15, 0.3):
            verdict = gap(blocks(1.7, 0.05, 0.01, seed), blocks(0.58, 0.05 + extra, 0.01, seed + 500))
            assert verdict is None or verdict.startswith("FLAG:"), verdict

