"""A second pair of processes before a small gain is called `faster`.

Two processes running the same kernel keep a speed difference for their whole life: where their
memory landed, physically, decides cache conflicts, and no resampling of rounds within one pair
can see it. On this project's 2-core VMs an honest copy of the softmax64 baseline measured up to
1.14x against its baseline in one pair (3 of 17 runs of the b26 fixture read `faster`, 2026-12-01),
past the 8% systematic term the interval carries (`stats.PROCESS_EFFECT`).

A gain that large is rarely drawn twice by independent pairs. So a `faster` verdict whose point
could still be a process effect (below CONFIRM_BELOW) is timed again on a fresh baseline process
and a fresh candidate process, and stands only when both pairs clear the bar: the reported
interval is the hull of the two, the point their geometric mean. A clear win is not timed twice:
the point, not the low end, decides, because an early stop's 99.9% interval is wide (a 1.4x
softmax stops at round 5 with a low end near 1.05) and would send every early win round again.

Unless the two sides' calls overlap: when the baseline's fast calls (20th percentile) are not faster
than the candidate's slow ones (80th) by the bar, a point above CONFIRM_BELOW can still be the luck of
which side drew the slow calls. On this VM an honest copy of KernelBench level2/67 (a 1.2 s
convolution holding 4 GB of temporaries) ran some calls in 1.0 s and others in 8-12 s, in both
processes, and one pair read 4.25x `faster` from a few rounds (2026-12-03); its baseline's 20th
percentile was 0.08x its candidate's 80th. True gains keep them apart: the bundled faster candidates of
cpp_softmax, torch_opchain and torch_attention (2.4-3.4x) read 1.7-3.2x there.
"""

from __future__ import annotations

from kernel_agent.core.timing_result import TimingResult

CONFIRM_BELOW = 1.3  # honest copies reached 1.14-1.18x in one pair (stats.PROCESS_EFFECT), plus round noise


def needs_confirmation(estimate: TimingResult, min_gain: float) -> bool:
    """A faster verdict whose point a per-process effect alone could have produced, or whose two sides' calls
    overlap."""
    if estimate.speedup_ci[0] <= 1 + min_gain:
        return False
    return estimate.speedup < CONFIRM_BELOW or overlap(estimate, min_gain) is not None


def overlap(estimate: TimingResult, min_gain: float) -> str | None:
    """The first shape whose baseline calls at their fastest (20th percentile) do not clear the bar over the
    candidate's at their slowest (80th), in words; None when every shape keeps the two sides apart."""
    for entry in estimate.per_shape:
        fast, slow = entry.baseline_p20_ms, entry.candidate_p80_ms
        if fast is not None and slow is not None and slow > 0 and fast / slow <= 1 + min_gain:
            return (
                f"at shape {list(entry.shape)} the baseline's fast calls ({fast:.3g} ms, 20th percentile) were "
                f"{fast / slow:.2f}x the candidate's slow ones ({slow:.3g} ms, 80th)"
            )
    return None


def reason_for(first: TimingResult, min_gain: float) -> str:
    """Why a verdict was timed on a second pair."""
    apart = overlap(first, min_gain) if first.speedup >= CONFIRM_BELOW else None
    if apart is not None:
        why = f"the two sides' calls overlapped ({apart})"
    else:
        why = f"the first pair's {first.speedup:.3f}x was below {CONFIRM_BELOW}x, in reach of a per-process effect"
    return f"{why}: timed again on fresh baseline and candidate processes"
