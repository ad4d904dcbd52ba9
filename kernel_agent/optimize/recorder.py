"""Every database write of one kernel's loop, and the restore of its search state from the database.

Each step is stored before the next one starts (DESIGN.md section 8): the LLM call before its
candidates, each candidate before its evaluation, each verdict as soon as it exists; and each is
stored before the search state learns of it. A killed run therefore resumes from the database
alone: `restore` rebuilds the state, stored verdicts are not redone, stored LLM replies are served
from the response cache, and only the evaluations that were in flight run again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from kernel_agent.core.verdict import Status, Verdict
from kernel_agent.db import writes as store
from kernel_agent.db.models import BASELINE, RETIME, CandidateRow, RunKernelRow
from kernel_agent.db.review_reads import review_summary
from kernel_agent.db.session import Database
from kernel_agent.optimize.search_state import Candidate, KernelResult, KernelStatus, SearchState
from kernel_agent.problem.load import Problem
from kernel_agent.propose.base import Attempt, LLMCall, Proposal


@dataclass(frozen=True)
class Stored:
    """Where a kernel stood in the database before this invocation."""

    status: str  # pending, running, or a KernelStatus
    reason: str
    unevaluated: list[Candidate]  # stored, never evaluated: in flight when the run was killed


class Recorder:
    """One kernel of one run on one device in the database: its run_kernels row (one per run, problem and the
    device the run named), candidates, evaluations and LLM calls."""

    def __init__(self, db: Database, run_id: int, problem: Problem, device: str = "auto") -> None:
        self.db = db
        self.run_id = run_id
        self.baseline_source = problem.baseline_source
        self.problem_id = store.ensure_problem(db, problem)
        self.run_kernel_id = store.add_run_kernel(db, run_id, self.problem_id, device)

    # ---- restore -----------------------------------------------------------------------------
    def restore(self, state: SearchState) -> Stored:
        """Fill a fresh state with what is stored (a new kernel has nothing yet)."""
        with self.db.session() as session:
            row = session.get(RunKernelRow, self.run_kernel_id)
            assert row is not None
            state.rounds_done = row.rounds_done
            candidates = session.scalars(
                select(CandidateRow).where(CandidateRow.run_kernel_id == self.run_kernel_id).order_by(CandidateRow.id)
            ).all()
            unevaluated = []
            for c in candidates:
                candidate = Candidate(c.id, c.source.text if c.source else "", c.note, c.round)
                verdict = Verdict.from_dict(c.evaluation.verdict) if c.evaluation is not None else None
                if c.origin == BASELINE and c.normalized_hash is None:
                    continue  # a baseline set aside by --retry: a past measurement, measured again after it
                if c.origin == BASELINE:
                    state.baseline_id, state.baseline = c.id, verdict
                elif c.origin == RETIME and c.parent_id is not None:  # a measurement: never an attempt or queued
                    state.remember_retime(c.parent_id, c.id, verdict)
                elif c.parse_error is not None:
                    state.remember_unparseable(c.id, c.note, c.parse_error, c.round)
                elif verdict is None:
                    unevaluated.append(state.queue(candidate))
                else:
                    state.remember(candidate, verdict, count=False)
            return Stored(row.status, row.reason, unevaluated)

    # ---- the baseline --------------------------------------------------------------------------
    def baseline(self, state: SearchState) -> None:
        """Store the baseline as the kernel's first candidate (once)."""
        if state.baseline_id is None:
            state.baseline_id = store.add_candidate(
                self.db,
                run_id=self.run_id,
                run_kernel_id=self.run_kernel_id,
                problem_id=self.problem_id,
                source=self.baseline_source,
                baseline_source=self.baseline_source,
                parent_id=None,
                parent_source=None,
                origin=BASELINE,
                round=0,
                note="the problem's baseline",
            )

    def baseline_verdict(self, state: SearchState, verdict: Verdict, seconds: float) -> None:
        assert state.baseline_id is not None
        store.add_evaluation(self.db, state.baseline_id, verdict, seconds)
        state.baseline = verdict

    # ---- a round -------------------------------------------------------------------------------
    def llm_calls(self, calls: list[LLMCall], round_index: int) -> list[int]:
        return [store.add_llm_call(self.db, call, self.run_id, self.run_kernel_id, round_index) for call in calls]

    def cached_call(self, prompt_hash: str) -> LLMCall | None:
        """The response cache: a reply already stored for this exact request."""
        return store.cached_call(self.db, prompt_hash)

    def proposal(
        self, state: SearchState, proposal: Proposal, call_ids: list[int], round_index: int
    ) -> Candidate | None:
        """Store one proposal; the candidate to evaluate, or None (no candidate in the reply, a
        repeat, or already evaluated)."""
        index = proposal.llm_call_index
        call_id = call_ids[index] if index is not None and index < len(call_ids) else None
        parent_id, parent_source = state.parent()
        common: dict[str, Any] = dict(
            run_id=self.run_id,
            run_kernel_id=self.run_kernel_id,
            problem_id=self.problem_id,
            baseline_source=self.baseline_source,
            round=round_index,
            parent_id=parent_id,
            origin=proposal.origin,
            note=proposal.note,
            llm_call_id=call_id,
        )
        if proposal.source is None:
            if not state.seen_unparseable(
                round_index, proposal.note, proposal.parse_error
            ):  # else: recorded before a restart
                candidate_id = store.add_candidate(
                    self.db, source=None, parent_source=None, parse_error=proposal.parse_error, **common
                )
                state.remember_unparseable(
                    candidate_id, proposal.note, proposal.parse_error or "no candidate in the reply", round_index
                )
            return None
        existing = store.find_candidate(self.db, self.run_kernel_id, proposal.source)
        if existing is not None:
            if state.resumable(existing.id, existing.round, round_index):
                return state.queue(Candidate(existing.id, proposal.source, proposal.note, round_index))
            store.count_duplicate(self.db, self.run_kernel_id)
            return None
        candidate_id = store.add_candidate(self.db, source=proposal.source, parent_source=parent_source, **common)
        return state.queue(Candidate(candidate_id, proposal.source, proposal.note, round_index))

    def verdict(self, state: SearchState, candidate: Candidate, verdict: Verdict, seconds: float) -> None:
        """Store a candidate's verdict (and the kernel's best when it changed), then tell the state."""
        store.add_evaluation(self.db, candidate.id, verdict, seconds)
        state.remember(candidate, verdict)
        if verdict.status == Status.FASTER:
            best = state.parents[0]
            store.update_run_kernel(
                self.db, self.run_kernel_id, best_candidate_id=best.candidate_id, best_speedup=best.speedup
            )

    def retime(self, state: SearchState, best: Attempt) -> Candidate:
        """Store the best's re-timing as a row of its own (origin `retime`, parent the best, no normalized hash:
        a measurement, never deduplicated against its parent); one stored before a kill is reused."""
        assert best.candidate_id is not None
        note = f"candidate {best.candidate_id} re-timed with all rounds"
        stored = state.retimes.get(best.candidate_id)
        if stored is not None:
            return Candidate(stored[0], best.source, note, state.rounds_done)
        candidate_id = store.add_candidate(
            self.db,
            run_id=self.run_id,
            run_kernel_id=self.run_kernel_id,
            problem_id=self.problem_id,
            source=best.source,
            baseline_source=self.baseline_source,
            parent_id=best.candidate_id,
            parent_source=best.source,
            origin=RETIME,
            round=state.rounds_done,
            note=note,
            variant=False,
        )
        state.remember_retime(best.candidate_id, candidate_id, None)
        return Candidate(candidate_id, best.source, note, state.rounds_done)

    def retime_verdict(
        self, state: SearchState, best_id: int, candidate: Candidate, verdict: Verdict, seconds: float
    ) -> None:
        store.add_evaluation(self.db, candidate.id, verdict, seconds)
        state.remember_retime(best_id, candidate.id, verdict)

    def round_done(self, state: SearchState, round_index: int) -> bool:
        """Store the finished round; True when the state's patience is spent."""
        store.update_run_kernel(self.db, self.run_kernel_id, rounds_done=round_index)
        return state.end_round(round_index)

    # ---- the kernel --------------------------------------------------------------------------
    def started(self) -> None:
        store.update_run_kernel(self.db, self.run_kernel_id, status="running")

    def run_started(self) -> datetime:
        return store.run_started_at(self.db, self.run_id)

    def baseline_ms(self, ms: float | None) -> None:
        store.update_run_kernel(self.db, self.run_kernel_id, baseline_ms=ms)

    def finish(self, result: KernelResult) -> None:
        store.update_run_kernel(
            self.db,
            self.run_kernel_id,
            status=KernelStatus(result.status).value,
            reason=result.reason,
            baseline_ms=result.baseline_ms,
            best_ms=result.best_ms,
            best_candidate_id=result.best_candidate,
            best_speedup=result.speedup,
        )

    def review(self, candidate_id: int, verdict: Verdict) -> dict[str, Any]:
        """What every result view says about a flagged candidate, with the command that approves it."""
        return review_summary(candidate_id, verdict.speedup, verdict.speedup_ci, verdict.reason, self.db)
