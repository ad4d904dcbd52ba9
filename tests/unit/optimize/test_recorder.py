"""The recorder (kernel_agent/optimize/recorder.py): what it stores, a fresh state restores, so a
resumed kernel asks the same question."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from conftest import timing_record
from sqlalchemy import select

from kernel_agent.core.timing_result import Stopping
from kernel_agent.core.verdict import Verdict
from kernel_agent.db.models import CandidateRow
from kernel_agent.db.session import open_database
from kernel_agent.db.writes import create_run
from kernel_agent.optimize.config import SearchConfig
from kernel_agent.optimize.recorder import Recorder
from kernel_agent.optimize.search_state import Candidate, KernelStatus, SearchState
from kernel_agent.problem.load import load_problem
from kernel_agent.propose.base import LLMCall, Proposal

SOFTMAX = Path(__file__).resolve().parents[2] / "fixtures" / "softmax64"


def verdict(status: str, speedup: float | None) -> Verdict:
    return Verdict(
        status=status,
        correct=True,
        speedup=speedup,
        speedup_ci=[1.1, 1.3] if speedup else None,
        timing=timing_record(speedup, (1.1, 1.3), per_shape=[], max_rounds=None, stopping=None) if speedup else None,
    )


def test_what_is_stored_restores_into_the_same_state(tmp_path: Path) -> None:
    db = open_database(str(tmp_path / "runs.db"))
    run_id, problem = create_run(db, "openai", "m", {}), load_problem(SOFTMAX)
    recorder, state = Recorder(db, run_id, problem), SearchState(problem.name, problem.baseline_source, SearchConfig())
    assert recorder.restore(state).status == "pending" and state.attempts == {}
    recorder.started()
    recorder.baseline(state)
    recorder.baseline_verdict(state, verdict("correct", 1.0), 1.0)
    (call_id,) = recorder.llm_calls([LLMCall("h1", "m", "url", {"messages": []}, ["reply"])], 1)
    fast = recorder.proposal(
        state, Proposal("def kernel(x):\n    return x\n", "openai", "fast one", llm_call_index=0), [call_id], 1
    )
    assert (
        fast is not None
        and recorder.proposal(
            state, Proposal(None, "openai", "chatty", parse_error="no code block", llm_call_index=0), [call_id], 1
        )
        is None
    )
    assert (
        recorder.proposal(state, Proposal("def kernel(x):\n    return x\n", "openai", "again"), [call_id], 1) is None
    )  # a repeat: counted, not stored
    recorder.verdict(state, fast, verdict("faster", 1.2), 0.5)
    in_flight = recorder.proposal(
        state, Proposal("def kernel(x):\n    return x * 1\n", "openai", "killed"), [call_id], 1
    )
    assert in_flight is not None and not recorder.round_done(state, 1)

    # A new process (after SIGKILL): the same rows, a fresh state.
    again, fresh = Recorder(db, run_id, problem), SearchState(problem.name, problem.baseline_source, SearchConfig())
    stored = again.restore(fresh)
    assert again.run_kernel_id == recorder.run_kernel_id and stored.status == "running"
    assert stored.unevaluated == [Candidate(in_flight.id, in_flight.source, "killed", 1)]
    assert (
        fresh.history_before(2) == state.history_before(2) and fresh.parents == state.parents
    )  # the same prompt as the first time
    assert (fresh.baseline_id, fresh.rounds_done, list(fresh.rounds_left())) == (state.baseline_id, 1, [2, 3])
    assert fresh.baseline is not None and fresh.baseline.status == "correct"
    assert fresh.new_verdicts == 0  # restored verdicts are not this invocation's work
    # Proposed again after the restart: the unparseable reply is not stored twice, the evaluated one is a repeat.
    assert again.proposal(fresh, Proposal(None, "openai", "chatty", parse_error="no code block"), [], 1) is None
    assert again.proposal(fresh, Proposal("def kernel(x):\n    return x\n", "openai", "fast one"), [], 2) is None
    assert again.cached_call("h1") is not None

    result = fresh.result(KernelStatus.IMPROVED, "", again.review)
    again.finish(result)
    assert again.restore(SearchState(problem.name, problem.baseline_source, SearchConfig())).status == "improved"


def test_a_retime_row_is_a_measurement_stored_without_a_hash_and_restored_as_one(tmp_path: Path) -> None:
    """A kill after the retime row was stored (before its verdict) reuses that row on resume; once its verdict
    is stored, a resumed kernel neither re-times again nor loses it."""
    db = open_database(str(tmp_path / "runs.db"))
    run_id, problem = create_run(db, "search", None, {}), load_problem(SOFTMAX)
    recorder, state = Recorder(db, run_id, problem), SearchState(problem.name, problem.baseline_source, SearchConfig())
    recorder.baseline(state)
    recorder.baseline_verdict(state, verdict("correct", 1.0), 1.0)
    best = recorder.proposal(state, Proposal("def kernel(x):\n    return x\n", "search", "fast"), [], 1)
    assert best is not None
    accepted = verdict("faster", 2.0)
    accepted.timing = replace(accepted.timing, stopping=Stopping(rule="sequential", settled_early=True))
    recorder.verdict(state, best, accepted, 0.5)
    recorder.round_done(state, 1)
    due = state.retime_due()
    assert due is not None and due.candidate_id == best.id
    row = recorder.retime(state, due)
    (stored,) = [c for c in _candidates(db) if c.origin == "retime"]
    assert (stored.id, stored.parent_id, stored.normalized_hash, stored.round) == (row.id, best.id, None, 1)
    assert stored.source_hash == next(c.source_hash for c in _candidates(db) if c.id == best.id)

    killed = SearchState(problem.name, problem.baseline_source, SearchConfig())
    again = Recorder(db, run_id, problem)
    assert again.restore(killed).unevaluated == []  # not a candidate to evaluate as a variant
    assert killed.retime_due() is not None and again.retime(killed, due).id == row.id  # the stored row, reused
    assert len(_candidates(db)) == 3
    again.retime_verdict(killed, best.id, row, verdict("faster", 1.8), 2.0)

    resumed = SearchState(problem.name, problem.baseline_source, SearchConfig())
    Recorder(db, run_id, problem).restore(resumed)
    assert resumed.retime_due() is None and row.id not in resumed.attempts
    assert [a.candidate_id for a in resumed.parents] == [best.id]
    result = resumed.result(KernelStatus.IMPROVED, "", again.review)
    assert (result.best_candidate, result.record_candidate, result.speedup) == (best.id, row.id, 1.8)


def _candidates(db) -> list[CandidateRow]:
    with db.session() as session:
        return list(session.scalars(select(CandidateRow).order_by(CandidateRow.id)).all())


def test_each_device_a_run_names_has_its_own_row_and_a_restart_finds_it(tmp_path: Path) -> None:
    """`optimize --device cpu,cuda`: one run_kernels row per (run, problem, device); a kernel that never ran on
    a device that was not there is not counted in the run's fast_p."""
    from kernel_agent.db.reads import run_detail

    db = open_database(str(tmp_path / "runs.db"))
    run_id, problem = create_run(db, "search", None, {}), load_problem(SOFTMAX)
    cpu, cuda = Recorder(db, run_id, problem, "cpu"), Recorder(db, run_id, problem, "cuda")
    assert cpu.run_kernel_id != cuda.run_kernel_id
    assert Recorder(db, run_id, problem, "cuda").run_kernel_id == cuda.run_kernel_id  # a resume: the same row
    state = SearchState(problem.name, problem.baseline_source, SearchConfig())
    cpu.restore(state)
    cpu.baseline(state)
    cpu.baseline_verdict(state, verdict("correct", 1.0), 1.0)
    fast = cpu.proposal(state, Proposal("def kernel(x):\n    return x\n", "search", "fast one"), [], 1)
    assert fast is not None
    cpu.verdict(state, fast, verdict("faster", 1.2), 0.5)
    cpu.finish(state.result(KernelStatus.IMPROVED, "", cpu.review))
    cuda.finish(
        SearchState(problem.name, problem.baseline_source, SearchConfig()).result(
            KernelStatus.NO_DEVICE, "no CUDA device is visible here", cuda.review
        )
    )
    detail = run_detail(db, run_id)
    assert detail is not None
    assert [(k["device"], k["status"], k["best_candidate"]) for k in detail["kernels"]] == [
        ("cpu", "improved", fast.id),
        ("cuda", "no_device", None),
    ]
    assert detail["metrics"]["n"]["baseline"] == 1 and detail["metrics"]["fast_p"]["baseline"]["fast_1.0"] == 1.0
