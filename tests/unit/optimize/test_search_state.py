"""The search policy alone (kernel_agent/optimize/search_state.py): no database, no executor, no sandbox."""

from __future__ import annotations

from dataclasses import replace

from conftest import shape_timing, timing_record

from kernel_agent.core.timing_result import Processes, Resolution, Stopping
from kernel_agent.core.verdict import Verdict
from kernel_agent.optimize.config import SearchConfig
from kernel_agent.optimize.search_state import Candidate, KernelStatus, SearchState, stopped_early


def timed(status: str, speedup: float | None, baseline_ms: float = 2.0) -> Verdict:
    timing = None
    if speedup is not None:
        shape = shape_timing((8,), base_ms=baseline_ms, cand_ms=baseline_ms / speedup)
        timing = timing_record(speedup, per_shape=[shape], max_rounds=None, stopping=None)  # nothing said on rounds
    return Verdict(
        status=status,
        correct=status in ("faster", "correct", "flagged"),
        speedup=speedup,
        speedup_ci=[1.0, 2.0] if speedup else None,
        timing=timing,
    )


def state(**config: float) -> SearchState:
    fresh = SearchState("k", "baseline source", SearchConfig(**config))  # type: ignore[arg-type]
    fresh.baseline_id = 1
    return fresh


def add(s: SearchState, cid: int, status: str, speedup: float | None, round_index: int = 1) -> None:
    s.remember(Candidate(cid, f"source {cid}", f"note {cid}", round_index), timed(status, speedup))


def no_review(candidate_id: int, verdict: Verdict) -> dict:
    raise AssertionError("no flagged candidate should need a review here")


def test_parents_are_the_beam_of_accepted_variants_fastest_first() -> None:
    s = state(beam=2)
    add(s, 2, "faster", 1.5)
    add(s, 3, "correct", 1.01)
    add(s, 4, "flagged", 9.0)  # flagged: waits for a human, never a parent
    add(s, 5, "faster", 2.0)
    add(s, 6, "faster", 1.5)  # ties with 2: the older one first
    assert [a.candidate_id for a in s.parents] == [5, 2]
    assert s.parent() == (5, "source 5")
    assert (s.new_verdicts, s.new_accepted) == (5, 3)


def test_without_parents_new_candidates_derive_from_the_baseline() -> None:
    s = state()
    add(s, 2, "incorrect", None)
    assert s.parents == [] and s.parent() == (1, "baseline source") and s.best_speedup() == 1.0


def test_history_holds_earlier_rounds_in_storage_order() -> None:
    s = state()
    add(s, 9, "correct", 1.0, round_index=1)
    add(s, 3, "faster", 1.2, round_index=2)
    s.remember_unparseable(5, "reply", "no code block", 1)
    assert [a.candidate_id for a in s.history_before(2)] == [5, 9]
    assert [a.candidate_id for a in s.history_before(3)] == [3, 5, 9]


def test_patience_counts_rounds_in_a_row_without_a_better_best() -> None:
    s = state(patience=2, proposal_rounds=5)
    s.begin_round()
    add(s, 2, "faster", 1.5)
    assert s.end_round(1) is False and s.stale_rounds == 0
    s.begin_round()
    add(s, 3, "faster", 1.4)  # accepted, but not better
    assert s.end_round(2) is False and s.stale_rounds == 1
    s.begin_round()
    assert s.end_round(3) is True and s.rounds_done == 3
    assert list(s.rounds_left()) == [4, 5]


def test_a_better_best_resets_patience() -> None:
    s = state(patience=2)
    s.begin_round()
    assert s.end_round(1) is False
    s.begin_round()
    add(s, 2, "faster", 1.1)
    assert s.end_round(2) is False and s.stale_rounds == 0


def test_roofline_stop_reason() -> None:
    assert "0.95 of the roofline floor (--roofline-stop 0.9)" in state().near_floor(0.95)
    assert state().near_floor(0.5) == "" and state().near_floor(None) == ""
    assert state(roofline_stop=0).near_floor(0.99) == ""
    assert "1.05 of the roofline floor" in state().near_floor(1.05)  # at the floor, within its noise


def test_a_best_far_past_the_floor_does_not_stop_the_search() -> None:
    """Seen in the README demo on a loaded machine: ceilings measured under load put the floor above the best's
    time (27.8 times it for torch_attention) and the search stopped after one round."""
    assert state().near_floor(1.72) == "" and state().near_floor(27.8) == ""


def test_outcome_improved_needs_review_or_no_gain() -> None:
    improved, review, nothing = state(), state(), state()
    add(improved, 2, "faster", 1.3)
    add(review, 2, "flagged", 12.0)
    add(nothing, 2, "correct", 1.0)
    assert improved.outcome()[0] is KernelStatus.IMPROVED
    assert review.outcome()[0] is KernelStatus.NEEDS_REVIEW
    assert nothing.outcome() == (KernelStatus.NO_GAIN, "no candidate was verifiably faster than the baseline")


def test_result_takes_both_times_from_the_best_candidates_own_ab_run() -> None:
    s = state()
    s.baseline = timed("correct", 1.0, baseline_ms=3.0)
    add(s, 2, "faster", 1.6)
    result = s.result(KernelStatus.IMPROVED, "", no_review)
    assert (result.best_candidate, result.speedup, result.baseline_ms, result.best_ms) == (2, 1.6, 2.0, 2.0 / 1.6)
    assert result.to_dict()["status"] == "improved" and result.review is None


def test_a_flagged_best_that_beats_every_accepted_one_waits_for_review() -> None:
    s = state()
    add(s, 2, "faster", 1.5)
    add(s, 3, "flagged", 11.0)
    result = s.result(
        KernelStatus.IMPROVED, "", lambda cid, v: {"candidate": cid, "note": f"candidate {cid} awaits review"}
    )
    assert result.best_candidate == 2 and result.review == {"candidate": 3, "note": "candidate 3 awaits review"}
    assert result.reason == "candidate 3 awaits review"
    slower = state()
    add(slower, 2, "faster", 1.5)
    add(slower, 3, "flagged", 1.2)
    assert slower.best_flagged() is None and slower.result(KernelStatus.IMPROVED, "", no_review).review is None


def test_with_nothing_accepted_the_flagged_best_is_the_result() -> None:
    s = state()
    add(s, 4, "flagged", 12.0)
    add(s, 5, "flagged", 12.0)  # a tie: the older one
    result = s.result(KernelStatus.NEEDS_REVIEW, "", lambda cid, v: {"note": "n"})
    assert (result.best_candidate, result.speedup, result.reason) == (4, 12.0, "n")


def test_restart_bookkeeping_resumes_in_flight_candidates_once() -> None:
    s = state()
    s.remember_unparseable(7, "reply 1", "no code block", 2)
    assert s.seen_unparseable(2, "reply 1", "no code block") and not s.seen_unparseable(3, "reply 1", "no code block")
    assert s.resumable(8, stored_round=2, round_index=2)
    assert not s.resumable(8, stored_round=1, round_index=2)  # an earlier round's candidate proposed again: a duplicate
    s.queue(Candidate(8, "src", "", 2))
    assert not s.resumable(8, 2, 2) and not s.resumable(1, 2, 2)  # queued already; the baseline


# ---- re-timing the best (optimize --retime-best) ----------------------------------------------------------------


def early(speedup: float, ci: tuple[float, float], settled_early: bool = True, status: str = "faster") -> Verdict:
    """A verdict whose timing record says whether a sequential look ended it (timing/ab_timing.py `stopping`)."""
    verdict = timed(status, speedup)
    verdict.speedup_ci = list(ci)
    assert verdict.timing is not None
    verdict.timing = replace(
        verdict.timing,
        rounds=4 if settled_early else 10,
        max_rounds=10,
        stopping=Stopping(rule="sequential", settled_early=settled_early, min_rounds=4),
    )
    return verdict


def fixed(speedup: float, ci: tuple[float, float], status: str) -> Verdict:
    verdict = timed(status, speedup, baseline_ms=2.2)
    verdict.speedup_ci = list(ci)
    assert verdict.timing is not None
    verdict.timing = replace(verdict.timing, rounds=10, max_rounds=10, stopping=Stopping(rule="fixed rounds"))
    return verdict


def test_stopped_early_reads_the_timing_record_and_each_confirmation_pair() -> None:
    assert stopped_early(early(2.0, (1.5, 3.0)).timing)
    assert not stopped_early(early(2.0, (1.5, 3.0), settled_early=False).timing)
    assert not stopped_early(fixed(2.0, (1.8, 2.2), "faster").timing) and not stopped_early(None)
    late = Stopping(rule="sequential", settled_early=False)
    confirmed = timing_record(rounds=14, max_rounds=10, stopping=late)
    looked = replace(late, settled_early=True)
    pairs = [replace(confirmed.pair_reading(), stopping=s) for s in (looked, late)]
    assert stopped_early(replace(confirmed, pairs=pairs))  # the first pair stopped at an early look
    fixed_pairs = [replace(confirmed.pair_reading(), stopping=Stopping(rule="fixed rounds"))] * 2
    assert not stopped_early(replace(confirmed, pairs=fixed_pairs))
    # a record without `stopping`: fewer rounds than the most
    assert stopped_early(timing_record(rounds=5, max_rounds=10, stopping=None))


def test_only_a_best_accepted_by_an_early_look_is_due_for_a_retime_and_only_once() -> None:
    s = state()
    add(s, 2, "faster", 1.2)  # no stopping record and no rounds: not known to have stopped early
    s.remember(Candidate(3, "source 3", "", 1), early(2.0, (1.1, 4.0)))
    s.remember(Candidate(4, "source 4", "", 1), early(1.5, (1.1, 2.0)))  # stopped early, but not the best
    due = s.retime_due()
    assert due is not None and (due.candidate_id, due.source) == (3, "source 3")
    s.remember_retime(3, 9, None)  # stored, then the run was killed: still due
    assert s.retime_due() is not None and s.retime_due().candidate_id == 3  # type: ignore[union-attr]
    s.remember_retime(3, 9, fixed(1.9, (1.7, 2.1), "faster"))
    assert s.retime_due() is None
    assert [a.candidate_id for a in s.parents] == [3, 4] and 9 not in s.attempts  # a measurement, never a parent
    off = state(retime_best=False)
    off.remember(Candidate(3, "source 3", "", 1), early(2.0, (1.1, 4.0)))
    assert off.retime_due() is None
    settled_late = state()
    settled_late.remember(Candidate(3, "source 3", "", 1), fixed(2.0, (1.8, 2.2), "faster"))
    assert settled_late.retime_due() is None


def test_a_best_screened_on_one_pair_is_due_when_the_retime_gets_several() -> None:
    """--record-processes: a best that settled late on one pair is re-timed where its re-timing gets several pairs
    (a small CPU problem), once; one already timed on several pairs is not; nor with --no-retime-best."""
    s = state()
    s.remember(Candidate(3, "source 3", "", 1), fixed(1.3, (1.1, 1.5), "faster"))
    assert s.retime_due() is None and s.retime_due(several=True).candidate_id == 3  # type: ignore[union-attr]
    s.remember_retime(3, 9, fixed(1.3, (1.25, 1.35), "faster"))
    assert s.retime_due(several=True) is None
    measured = state()
    on_pairs = fixed(1.3, (1.1, 1.5), "faster")
    assert on_pairs.timing is not None
    on_pairs.timing = replace(on_pairs.timing, processes=Processes(pairs=3, pair_speedups=(1.29, 1.3, 1.31)))
    measured.remember(Candidate(3, "source 3", "", 1), on_pairs)
    assert measured.retime_due(several=True) is None
    off = state(retime_best=False)
    off.remember(Candidate(3, "source 3", "", 1), fixed(1.3, (1.1, 1.5), "faster"))
    assert off.retime_due(several=True) is None


def test_a_retime_on_several_pairs_says_so_with_its_speed_class() -> None:
    s = state()
    s.remember(Candidate(3, "source 3", "", 1), fixed(1.3, (1.1, 1.5), "faster"))
    retimed = fixed(1.04, (1.03, 1.05), "faster")
    assert retimed.timing is not None
    said = Resolution(target=0.03, half_width=0.01, mde=0.03, ended_by="settled", budget_s=8.0, speed_class="FAST")
    retimed.timing = replace(retimed.timing, processes=Processes(pairs=3), resolution=said)
    s.remember_retime(3, 9, retimed)
    result = s.result(KernelStatus.IMPROVED, "", no_review)
    assert result.reason.startswith(
        "re-timed with all rounds (candidate 9) on 3 pairs of processes: 1.04x [1.03, 1.05], faster (FAST); "
    )


def test_a_faster_retime_is_the_number_of_record_with_its_own_times() -> None:
    s = state()
    s.remember(Candidate(3, "source 3", "", 1), early(5.33, (2.06, 13.82)))
    s.remember_retime(3, 9, fixed(4.97, (4.38, 5.53), "faster"))
    result = s.result(KernelStatus.IMPROVED, "", no_review)
    assert (result.best_candidate, result.record_candidate) == (3, 9)  # the variant stays the one to review and ship
    assert (result.speedup, result.speedup_ci) == (4.97, [4.38, 5.53])
    assert (result.baseline_ms, result.best_ms) == (2.2, 2.2 / 4.97)  # both from the retime's own A/B run
    assert result.reason == (
        "re-timed with all rounds (candidate 9): 4.97x [4.38, 5.53], faster; "
        "the early look read 5.33x [2.06, 13.82], faster"
    )
    again = s.result(KernelStatus.IMPROVED, result.reason, no_review)  # a finished kernel resumed: its stored reason
    assert again.reason == result.reason


def test_a_retime_that_is_not_faster_leaves_the_early_look_and_says_what_it_read() -> None:
    s = state()
    s.remember(Candidate(3, "source 3", "", 1), early(1.3, (1.03, 1.6)))
    s.remember_retime(3, 9, fixed(1.01, (0.97, 1.05), "correct"))
    result = s.result(KernelStatus.IMPROVED, "", no_review)
    assert (result.best_candidate, result.record_candidate, result.speedup, result.speedup_ci) == (
        3,
        3,
        1.3,
        [1.03, 1.6],
    )
    assert result.best_ms == 2.0 / 1.3
    assert result.reason == "re-timed with all rounds (candidate 9): 1.01x [0.97, 1.05], correct; the early look stands"
    crashed = state()
    crashed.remember(Candidate(3, "source 3", "", 1), early(1.3, (1.03, 1.6)))
    crashed.remember_retime(3, 9, Verdict(status="timeout", reason="the candidate took longer than 180 s"))
    assert crashed.result(KernelStatus.IMPROVED, "", no_review).reason.endswith(
        "timeout: the candidate took longer than 180 s; the early look stands"
    )
