"""Which candidate an export ships: the shared selection, and the hf-kernels path for kernels verified only under
the Triton interpreter (never a rejected candidate, a flagged one only once approved)."""

from __future__ import annotations

from datetime import datetime

import pytest

from kernel_agent.db import review_reads as rq
from kernel_agent.export.formats import Format
from kernel_agent.export.package import ExportError, check_format_name, choose_winner


def candidate(
    cid: int, status: str, *, interpreted: bool = False, origin: str = "llm", decision: str = "", speedup=None
):
    return rq.CandidateRecord(
        id=cid, run_id=1, kernel="k", problem_id=1, problem_path="/p", problem_kind="native", round=1,
        origin=origin, parent_id=None, note="", status=status, reason="", speedup=speedup, ci_low=None,
        ci_high=None, baseline_ms=None, candidate_ms=None, device="cpu", device_name="cpu", isolation="none",
        backend="triton" if interpreted else "torch", interpreted=interpreted, flags=[], verdict={},
        environment={}, evaluated_at=None, source="", diff_baseline="", diff_parent="",
        decision=rq.Decision(decision, "r", "", datetime(2026, 12, 1)) if decision else None,
    )  # fmt: skip


def kernel(*candidates: rq.CandidateRecord, status: str = "needs_gpu") -> rq.KernelRecord:
    return rq.KernelRecord(
        name="k", status=status, reason="", rounds_done=1, baseline_ms=None, best_ms=None, best_speedup=None,
        best_candidate_id=None, problem_path="/p", problem_kind="native", reference_source="", baseline_source="",
        candidates=list(candidates),
    )  # fmt: skip


def test_interpreted_kernels_ship_only_in_hf_kernels_and_prefer_a_rewrite_over_the_baseline() -> None:
    k = kernel(candidate(1, "correct", interpreted=True, origin="baseline"), candidate(2, "correct", interpreted=True))
    assert choose_winner(k, False)[0] is None and "Triton interpreter" in choose_winner(k, False)[1]
    assert choose_winner(k, False, allow_interpreted=True)[0].id == 2
    only_baseline = kernel(candidate(1, "correct", interpreted=True, origin="baseline"))
    assert choose_winner(only_baseline, False, allow_interpreted=True)[0].id == 1


def test_interpreted_selection_never_ships_a_rejected_or_unapproved_flagged_candidate() -> None:
    rejected = kernel(
        candidate(1, "correct", interpreted=True, origin="baseline", decision="reject"),
        candidate(2, "flagged", interpreted=True),
    )
    winner, reason = choose_winner(rejected, False, allow_interpreted=True)
    assert winner is None and "rejected or unapproved" in reason
    approved = kernel(candidate(2, "flagged", interpreted=True, decision="approve"))
    assert choose_winner(approved, False, allow_interpreted=True)[0].id == 2
    unreviewed = kernel(candidate(2, "correct", interpreted=True))
    assert choose_winner(unreviewed, True, allow_interpreted=True)[0] is None  # --approved-only


def test_a_timed_winner_is_chosen_as_before_with_either_format() -> None:
    k = kernel(
        candidate(3, "faster", speedup=1.5), candidate(4, "faster", speedup=2.0, decision="reject"), status="improved"
    )
    for allow in (False, True):
        assert choose_winner(k, False, allow_interpreted=allow)[0].id == 3


@pytest.mark.parametrize("name", ["my_kernels_", "my__kernels", "x"])
def test_hf_kernels_names_follow_the_formats_rule(name: str) -> None:
    with pytest.raises(ExportError, match="hf-kernels"):
        check_format_name(name, Format.HF_KERNELS)
    check_format_name(name, Format.PIP)
