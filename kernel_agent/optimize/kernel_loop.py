"""One kernel's optimization loop: baseline, then rounds of propose -> dedupe -> evaluate -> keep the best.

Every step is stored before the next one starts (DESIGN.md section 8): the LLM
call before its candidates, each candidate before its evaluation, each verdict
as soon as it exists. A killed run therefore resumes from the database alone:
stored verdicts are not redone, stored LLM replies are served from the
response cache, and only the evaluations that were in flight run again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import select

from kernel_agent.core.verdict import Verdict
from kernel_agent.db import writes as store
from kernel_agent.db.models import CandidateRow, RunKernelRow
from kernel_agent.db.review_reads import review_summary
from kernel_agent.db.session import Database
from kernel_agent.evaluate.pipeline import EvalOptions, run_device
from kernel_agent.measure.stats import typical_ms
from kernel_agent.optimize.budget import Budget, BudgetLimits
from kernel_agent.optimize.config import SearchConfig
from kernel_agent.optimize.executors.local import Executor, LocalExecutor
from kernel_agent.problem.load import Problem
from kernel_agent.propose.base import Attempt, Proposal, ProposalContext, Provider

TERMINAL = ("improved", "no_gain", "needs_review", "needs_gpu", "baseline_failed", "provider_failed")


@dataclass
class LoopOptions:
    search: SearchConfig = field(default_factory=SearchConfig)
    eval: EvalOptions = field(default_factory=EvalOptions)
    budget: BudgetLimits = field(default_factory=BudgetLimits)  # per kernel


@dataclass
class KernelResult:
    name: str
    status: str  # improved, needs_review, no_gain, needs_gpu, baseline_failed, provider_failed, budget_reached, interrupted
    baseline_ms: float | None = None
    best_ms: float | None = None
    speedup: float | None = None
    best_candidate: int | None = None
    reason: str = ""
    evaluated: int = 0
    accepted: int = 0
    # The best flagged candidate when it beats every accepted one: it waits for a human (review_queries.review_summary).
    review: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "status": self.status, "baseline_ms": self.baseline_ms, "best_ms": self.best_ms,
            "speedup": self.speedup, "best_candidate": self.best_candidate, "reason": self.reason, "review": self.review,
        }


Progress = Callable[[str, dict[str, Any]], None]


def _no_progress(event: str, data: dict[str, Any]) -> None:
    pass


@dataclass
class Shared:
    """What all kernels of a run share: where evaluations run, LLM concurrency, the run budget, the stop flag."""

    executor: Executor = field(default_factory=lambda: LocalExecutor(1))
    llm_slots: AbstractContextManager = field(default_factory=nullcontext)
    budget: Budget = field(default_factory=lambda: Budget(BudgetLimits(), "run"))
    stop: threading.Event = field(default_factory=threading.Event)
    ceilings: dict[str, Any] = field(default_factory=dict)  # device -> profile.Ceilings, measured once per device fingerprint


@dataclass
class Pending:
    candidate_id: int
    source: str
    note: str
    round: int
    future: Future[Verdict] | None = None
    started: float = 0.0


@dataclass
class KernelLoop:
    db: Database
    run_id: int
    problem: Problem
    provider: Provider
    options: LoopOptions
    progress: Progress = _no_progress
    shared: Shared = field(default_factory=Shared)

    def __post_init__(self) -> None:
        self.problem_id = store.ensure_problem(self.db, self.problem)
        self.run_kernel_id = store.add_run_kernel(self.db, self.run_id, self.problem_id)
        self.baseline_source = self.problem.baseline_source
        self.device = run_device(self.problem, self.options.eval.device)
        self.budget = Budget(self.options.budget, "kernel", parent=self.shared.budget)
        self.profiling = getattr(self.provider, "reads_profile", True)  # operator breakdowns only for providers that read them
        self.attempts: dict[int, Attempt] = {}  # candidate id -> evaluated attempt (or unparseable reply)
        self.accepted_verdicts: dict[int, Verdict] = {}
        self.flagged_verdicts: dict[int, Verdict] = {}  # wait for human review; never parents
        self.best_profiles: dict[int, dict[str, Any]] = {}
        self.baseline_id: int | None = None
        self.baseline_verdict: Verdict | None = None
        self.rounds_done = 0
        self.queued: set[int] = set()  # candidates handed to the executor by this process
        self.result = KernelResult(name=self.problem.name, status="no_gain")
        self._restore()

    # ---- state from the database ----------------------------------------------------
    def _restore(self) -> None:
        """Rebuild the loop's state from what is stored (a fresh kernel has nothing yet)."""
        with self.db.session() as session:
            row = session.get(RunKernelRow, self.run_kernel_id)
            assert row is not None
            self.rounds_done, self.stored_status, self.stored_reason = row.rounds_done, row.status, row.reason
            candidates = session.scalars(select(CandidateRow).where(CandidateRow.run_kernel_id == self.run_kernel_id).order_by(CandidateRow.id)).all()
            self.unevaluated: list[Pending] = []
            for c in candidates:
                evaluation = c.evaluation
                source = c.source.text if c.source else ""
                if c.origin == "baseline":
                    self.baseline_id = c.id
                    if evaluation is not None:
                        self.baseline_verdict = Verdict.from_dict(evaluation.verdict)
                    continue
                if c.parse_error is not None:
                    self.attempts[c.id] = Attempt(c.id, "", "unparseable", c.parse_error, None, c.note, c.round)
                elif evaluation is None:
                    self.unevaluated.append(Pending(c.id, source, c.note, c.round))
                else:
                    self._remember(c.id, source, c.note, c.round, Verdict.from_dict(evaluation.verdict), count=False)
            self.queued = {p.candidate_id for p in self.unevaluated}

    def _remember(self, candidate_id: int, source: str, note: str, round_index: int, verdict: Verdict, count: bool = True) -> None:
        self.attempts[candidate_id] = Attempt(candidate_id, source, verdict.status, verdict.reason, verdict.speedup, note, round_index)
        if verdict.status == "faster":
            self.accepted_verdicts[candidate_id] = verdict  # its profile goes into the prompt while it is the best
        elif verdict.status == "flagged" and verdict.speedup is not None:
            self.flagged_verdicts[candidate_id] = verdict
        if count:
            self.result.evaluated += 1
            if verdict.status == "faster":
                self.result.accepted += 1

    @property
    def parents(self) -> list[Attempt]:
        accepted = [a for a in self.attempts.values() if a.status == "faster" and a.speedup]
        return sorted(accepted, key=lambda a: (-(a.speedup or 0.0), a.candidate_id or 0))[: self.options.search.beam]

    def history_before(self, round_index: int) -> list[Attempt]:
        """Earlier rounds' attempts in storage order: the same prompt on a resume as the first time."""
        return [a for cid, a in sorted(self.attempts.items()) if a.round < round_index]

    # ---- steps -------------------------------------------------------------------------
    def _submit(self, pending: Pending) -> bool:
        """Start an evaluation unless a budget or the stop flag says no."""
        if self.shared.stop.is_set():
            return False
        reason = self.budget.try_take_candidate()
        if reason:
            self.budget_reason = reason
            return False
        self.progress("evaluate", {"kernel": self.problem.name, "round": pending.round, "candidate": pending.candidate_id, "note": pending.note})
        pending.started = time.perf_counter()
        pending.future = self.shared.executor.submit(self.problem, pending.source, self._eval_options("faster"))
        return True

    def _collect(self, pending: Pending) -> None:
        assert pending.future is not None
        verdict = pending.future.result()
        store.add_evaluation(self.db, pending.candidate_id, verdict, time.perf_counter() - pending.started)
        self._remember(pending.candidate_id, pending.source, pending.note, pending.round, verdict)
        if verdict.status == "faster":
            best = self.parents[0]
            store.update_run_kernel(self.db, self.run_kernel_id, best_candidate_id=best.candidate_id, best_speedup=best.speedup)
        self.progress("evaluated", {"kernel": self.problem.name, "candidate": pending.candidate_id, "status": verdict.status, "speedup": verdict.speedup})

    def _evaluate_all(self, batch: list[Pending]) -> bool:
        """Evaluate in parallel; False when a budget or the stop flag cut the batch short."""
        started = [p for p in batch if self._submit(p)]
        for pending in started:
            self._collect(pending)
        return len(started) == len(batch)

    def _baseline(self) -> Verdict:
        """The baseline against itself: its time, spread and correctness under the same protocol."""
        if self.baseline_id is None:
            self.baseline_id = store.add_candidate(
                self.db, run_id=self.run_id, run_kernel_id=self.run_kernel_id, problem_id=self.problem_id, source=self.baseline_source,
                baseline_source=self.baseline_source, parent_id=None, parent_source=None, origin="baseline", round=0, note="the problem's baseline",
            )
        if self.baseline_verdict is None:
            self.progress("baseline", {"kernel": self.problem.name})
            started = time.perf_counter()
            verdict = self.shared.executor.submit(self.problem, self.problem.baseline_as_candidate, self._eval_options("always")).result()
            store.add_evaluation(self.db, self.baseline_id, verdict, time.perf_counter() - started)
            self.baseline_verdict = verdict
        return self.baseline_verdict

    def _eval_options(self, profile: str) -> EvalOptions:
        """The run's options, with this device's ceilings (the roofline floor is part of every decision)."""
        return replace(self.options.eval, profile=profile if self.profiling else "never", ceilings=self.shared.ceilings.get(self.device))

    def _profile(self, verdict: Verdict, role: str = "baseline") -> dict[str, Any]:
        """The prompt's profile of one timed side of a verdict: the baseline's A/A run, or the current best."""
        breakdown = verdict.profile if verdict.profile and "error" not in verdict.profile else None
        try:
            from kernel_agent.measure.profile import build_profile

            return build_profile(self.problem, verdict.timing, self.device, self.shared.ceilings.get(self.device), role=role, breakdown=breakdown)
        except Exception as exc:  # noqa: BLE001 - a profile is advice; never let it stop the loop
            return {"error": f"profile unavailable: {type(exc).__name__}: {exc}"}

    def _best_profile(self) -> dict[str, Any] | None:
        parents = self.parents
        if not parents or parents[0].candidate_id not in self.accepted_verdicts:
            return None
        key = parents[0].candidate_id
        if key not in self.best_profiles:
            self.best_profiles[key] = self._profile(self.accepted_verdicts[key], role="candidate")
        return self.best_profiles[key]

    def _record(self, proposal: Proposal, call_ids: list[int], round_index: int) -> Pending | None:
        """Store one proposal; return what to evaluate (None: unparseable, a repeat, or already evaluated)."""
        call_id = call_ids[proposal.llm_call_index] if proposal.llm_call_index is not None and proposal.llm_call_index < len(call_ids) else None
        parents = self.parents
        parent_id = parents[0].candidate_id if parents else self.baseline_id
        parent_source = parents[0].source if parents else self.baseline_source
        common = dict(run_id=self.run_id, run_kernel_id=self.run_kernel_id, problem_id=self.problem_id, baseline_source=self.baseline_source, round=round_index)
        if proposal.source is None:
            if any(a.status == "unparseable" and a.round == round_index and a.note == proposal.note and a.reason == proposal.parse_error for a in self.attempts.values()):
                return None  # this round's reply was already recorded before a restart
            candidate_id = store.add_candidate(self.db, source=None, parent_id=parent_id, parent_source=None, origin=proposal.origin, note=proposal.note,
                                               parse_error=proposal.parse_error, llm_call_id=call_id, **common)
            self.attempts[candidate_id] = Attempt(candidate_id, "", "unparseable", proposal.parse_error or "no candidate in the reply", None, proposal.note, round_index)
            return None
        existing = store.find_candidate(self.db, self.run_kernel_id, proposal.source)
        if existing is not None:
            fresh = existing.id not in self.attempts and existing.id not in self.queued and existing.id != self.baseline_id
            if fresh and existing.round == round_index:
                self.queued.add(existing.id)
                return Pending(existing.id, proposal.source, proposal.note, round_index)  # stored, never evaluated (killed in flight)
            store.count_duplicate(self.db, self.run_kernel_id)
            return None
        candidate_id = store.add_candidate(self.db, source=proposal.source, parent_id=parent_id, parent_source=parent_source, origin=proposal.origin,
                                           note=proposal.note, llm_call_id=call_id, **common)
        self.queued.add(candidate_id)
        return Pending(candidate_id, proposal.source, proposal.note, round_index)

    # ---- the loop -------------------------------------------------------------------
    def run(self) -> KernelResult:
        result = self.result
        if self.stored_status in TERMINAL:
            return self._summary(self.stored_status, self.stored_reason)
        self.budget_reason = ""
        store.update_run_kernel(self.db, self.run_kernel_id, status="running")
        baseline = self._baseline()
        if not baseline.passed:
            return self._finish("baseline_failed", f"the baseline does not verify: {baseline.status}: {baseline.reason}")
        if baseline.interpreted:
            return self._finish("needs_gpu", "verified under the Triton interpreter; timing (and so optimization) needs a GPU")
        result.baseline_ms = typical_ms(baseline.timing, "baseline")
        store.update_run_kernel(self.db, self.run_kernel_id, baseline_ms=result.baseline_ms)
        profile = self._profile(baseline)
        if self.unevaluated and not self._evaluate_all(self.unevaluated):
            return self._stopped()
        stale_rounds = 0
        for round_index in range(self.rounds_done + 1, self.options.search.proposal_rounds + 1):
            if self.shared.stop.is_set() or self.budget.reached():
                return self._stopped()
            best_before = self.parents[0].speedup if self.parents else 1.0
            context = ProposalContext(
                problem=self.problem, baseline_source=self.baseline_source, parents=self.parents, history=self.history_before(round_index),
                profile=profile, best_profile=self._best_profile(), round=round_index, samples=self.options.search.samples, device=self.device,
                cache_lookup=lambda key: store.cached_call(self.db, key),
            )
            self.progress("round", {"kernel": self.problem.name, "round": round_index})
            with self.shared.llm_slots:
                batch = self.provider.propose(context)
            call_ids = []
            for call in batch.calls:
                call_ids.append(store.add_llm_call(self.db, call, self.run_id, self.run_kernel_id, round_index))
                self.budget.charge_call(call)
                self.progress("llm", {"kernel": self.problem.name, "tokens": 0 if call.cached else call.prompt_tokens + call.completion_tokens, "cost": 0 if call.cached else call.cost_usd})
            failed_calls = [c.error for c in batch.calls if c.error]
            if failed_calls and not batch.proposals:
                return self._finish("provider_failed", f"the provider failed: {failed_calls[-1]}")
            if not batch.proposals and batch.exhausted:
                break
            todo = [p for p in (self._record(proposal, call_ids, round_index) for proposal in batch.proposals) if p is not None]
            if not self._evaluate_all(todo):
                return self._stopped()
            self.rounds_done = round_index
            store.update_run_kernel(self.db, self.run_kernel_id, rounds_done=round_index)
            best_now = self.parents[0].speedup if self.parents else 1.0
            stale_rounds = 0 if (best_now or 0) > (best_before or 0) else stale_rounds + 1
            if stale_rounds >= self.options.search.patience:
                break
            near = self._near_roofline()
            if near:
                return self._finish("improved", near)
        if self.parents:
            return self._finish("improved", "")
        if self.flagged_verdicts:
            return self._finish("needs_review", "")  # _summary says which candidate and how to approve it
        return self._finish("no_gain", "no candidate was verifiably faster than the baseline")

    def _near_roofline(self) -> str:
        """A reason to stop when the best already runs close to the machine's floor (little left to find)."""
        profile = self._best_profile() if self.options.search.roofline_stop > 0 else None
        fraction = (profile or {}).get("fraction_of_floor")
        if isinstance(fraction, (int, float)) and fraction >= self.options.search.roofline_stop:
            return f"stopped early: the best runs at {fraction:.2f} of the roofline floor (--roofline-stop {self.options.search.roofline_stop:g})"
        return ""

    def _stopped(self) -> KernelResult:
        if self.shared.stop.is_set():
            return self._finish("interrupted", "stopped before finishing; resume the run to continue")
        return self._finish("budget_reached", self.budget_reason or self.budget.reached() or "budget reached")

    def _summary(self, status: str, reason: str) -> KernelResult:
        result = self.result
        result.status, result.reason = status, reason
        if self.baseline_verdict is not None and self.baseline_verdict.timing:
            result.baseline_ms = typical_ms(self.baseline_verdict.timing, "baseline")
        parents = self.parents
        if parents:
            best = parents[0]
            result.speedup, result.best_candidate = best.speedup, best.candidate_id
            verdict = self.accepted_verdicts.get(best.candidate_id) if best.candidate_id is not None else None
            if verdict is not None and verdict.timing:  # both times from the best's own A/B run: their ratio is its speedup
                result.baseline_ms, result.best_ms = typical_ms(verdict.timing, "baseline"), typical_ms(verdict.timing, "candidate")
        flagged = max(self.flagged_verdicts.items(), key=lambda item: (item[1].speedup or 0.0, -item[0]), default=None)
        if flagged is not None and (not parents or (flagged[1].speedup or 0.0) > (parents[0].speedup or 0.0)):
            candidate_id, verdict = flagged
            result.review = review_summary(candidate_id, verdict.speedup, verdict.speedup_ci, verdict.reason, self.db)
            if not parents:  # nothing accepted: the flagged best is the result, marked as waiting for review
                result.speedup, result.best_candidate = verdict.speedup, candidate_id
                if verdict.timing:
                    result.baseline_ms, result.best_ms = typical_ms(verdict.timing, "baseline"), typical_ms(verdict.timing, "candidate")
            if result.review["note"] not in result.reason:
                result.reason = "; ".join(part for part in (result.reason, result.review["note"]) if part)
        return result

    def _finish(self, status: str, reason: str) -> KernelResult:
        result = self._summary(status, reason)
        store.update_run_kernel(self.db, self.run_kernel_id, status=status, reason=result.reason, baseline_ms=result.baseline_ms, best_ms=result.best_ms,
                                best_candidate_id=result.best_candidate, best_speedup=result.speedup)
        self.progress("done", {"kernel": result.name, "status": status, "speedup": result.speedup})
        return result
