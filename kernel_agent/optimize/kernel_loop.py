"""One kernel's optimization loop: baseline, then rounds of propose -> store -> evaluate -> keep the best.

`run()` reads top to bottom. The search policy (parents, patience, outcome) is `SearchState`, pure;
every database write and the restore after a crash is `Recorder`; the prompt's roofline profiles are
`PromptProfiles`; budgets are `Budget`. What is left here is the order of the steps and where
evaluations run.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from kernel_agent.core.config import Device, ProfileWhen, ReferenceConfig
from kernel_agent.core.of_record import typical_ms
from kernel_agent.core.text import clean
from kernel_agent.core.verdict import RefusalKind, Status, Verdict
from kernel_agent.db.session import Database
from kernel_agent.evaluate.pipeline import EvalOptions, run_device
from kernel_agent.evaluate.references import references
from kernel_agent.evaluate.timed import pair_plan
from kernel_agent.memo.references import reference_points
from kernel_agent.optimize.budget import Budget
from kernel_agent.optimize.config import BudgetLimits, SearchConfig
from kernel_agent.optimize.executors.local import Executor, LocalExecutor
from kernel_agent.optimize.prompt_profile import PromptProfiles
from kernel_agent.optimize.recorder import Recorder
from kernel_agent.optimize.search_state import TERMINAL, Candidate, KernelResult, KernelStatus, SearchState
from kernel_agent.problem.load import Problem
from kernel_agent.propose.base import ProposalBatch, ProposalContext, Provider
from kernel_agent.propose.seeds import seed_proposals

LOG = logging.getLogger(__name__)

__all__ = [
    "TERMINAL",
    "KernelLoop",
    "KernelResult",
    "KernelStatus",
    "LoopOptions",
    "Progress",
    "Shared",
    "missing_device",
]


def missing_device(problem: Problem, requested: str) -> str:
    """Why `problem` cannot run on the device its run named ('' when it can, and always for auto): `run_device`
    moves a kernel to the CPU when the named device is not there, which a run that lists its devices must not do."""
    if requested == Device.AUTO or run_device(problem, requested) == requested:
        return ""
    import torch

    if requested == Device.CUDA and not torch.cuda.is_available():
        return "no CUDA device is visible here"
    return f"{problem.name} runs on the {problem.device} only (its problem sets DEVICE = {problem.device!r})"


@dataclass
class LoopOptions:
    search: SearchConfig = field(default_factory=SearchConfig)
    eval: EvalOptions = field(default_factory=EvalOptions)
    budget: BudgetLimits = field(default_factory=BudgetLimits)  # this kernel's own (the run's is in Shared)
    references: ReferenceConfig = field(default_factory=ReferenceConfig)


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
    ceilings: dict[str, Any] = field(
        default_factory=dict
    )  # device -> profile.Ceilings, measured once per device fingerprint


@dataclass
class InFlight:
    candidate: Candidate
    future: Future[Verdict]
    started: float


@dataclass
class KernelLoop:
    db: Database
    run_id: int
    problem: Problem
    provider: Provider
    options: LoopOptions
    progress: Progress = _no_progress
    shared: Shared = field(default_factory=Shared)
    label: str = ""  # what progress events call this kernel (its name; with its device in a multi-device run)

    def __post_init__(self) -> None:
        self.label = self.label or self.problem.name
        self.named_device = str(self.options.eval.device)  # what the run named for this kernel: auto, cpu or cuda
        self.device = run_device(self.problem, self.options.eval.device)  # where it runs
        self.budget = Budget(self.options.budget, "kernel", parent=self.shared.budget)
        self.budget_reason = ""
        self.profiling = getattr(
            self.provider, "reads_profile", True
        )  # operator breakdowns only for providers that read them
        self.profiles = PromptProfiles(self.problem, self.shared.ceilings.get(self.device))
        self.recorder = Recorder(self.db, self.run_id, self.problem, self.named_device)
        self.state = SearchState(self.problem.name, self.problem.baseline_source, self.options.search)
        self.stored = self.recorder.restore(self.state)
        self.references: dict[str, dict[str, Any]] = {}  # eager, compile -> ReferencePoint.to_json()

    def run(self) -> KernelResult:
        """Baseline, then rounds until the rounds, the patience, the proposals, the budget or the roofline run out."""
        state = self.state
        if self.stored.status in TERMINAL:
            self._references(measure=False)
            return self._done(self._result(KernelStatus(self.stored.status), self.stored.reason))
        missing = missing_device(self.problem, self.named_device)
        if missing:  # never evaluated elsewhere than the device the run named
            return self._finish(KernelStatus.NO_DEVICE, missing)
        self.recorder.started()
        baseline = self._baseline()
        if baseline.refusal is not None and baseline.refusal.kind == RefusalKind.TOO_LARGE:
            return self._finish(KernelStatus.TOO_LARGE, baseline.reason)
        if not baseline.passed:
            return self._finish(
                KernelStatus.BASELINE_FAILED, f"the baseline does not verify: {baseline.status}: {baseline.reason}"
            )
        if baseline.interpreted:
            return self._finish(
                KernelStatus.NEEDS_GPU,
                "verified under the Triton interpreter; timing (and so optimization) needs a GPU",
            )
        self.recorder.baseline_ms(typical_ms(baseline.timing, "baseline"))
        self._references(measure=True)
        profile = self.profiles.of(baseline, role="baseline")
        if not self._evaluate_all(self.stored.unevaluated):  # in flight when an earlier invocation was killed
            return self._stopped()
        if self.options.search.seeds and not self._evaluate_all(self._seeds()):
            return self._stopped()
        for round_index in state.rounds_left():
            if self.shared.stop.is_set() or self.budget.reached():
                return self._stopped()
            state.begin_round()
            batch, call_ids = self._propose(round_index, profile)
            failed = [call.error for call in batch.calls if call.error]
            if failed and not batch.proposals:
                return self._finish(KernelStatus.PROVIDER_FAILED, f"the provider failed: {failed[-1]}")
            if not batch.proposals and batch.exhausted:
                break
            todo = [
                c
                for c in (self.recorder.proposal(state, p, call_ids, round_index) for p in batch.proposals)
                if c is not None
            ]
            if not self._evaluate_all(todo):
                return self._stopped()
            if self.recorder.round_done(state, round_index):  # patience spent
                break
            near = self._near_roofline()
            if near:
                return self._finish(KernelStatus.IMPROVED, near)
        return self._finish(*state.outcome())

    # ---- steps -------------------------------------------------------------------------------
    def _baseline(self) -> Verdict:
        """The baseline against itself: its time, spread and correctness under the same protocol."""
        self.recorder.baseline(self.state)
        if self.state.baseline is None:
            self.progress("baseline", {"kernel": self.label})
            started = time.perf_counter()
            options = replace(self._eval_options(ProfileWhen.ALWAYS), second_look=1)  # itself: nothing to resolve
            verdict = settled(
                self.shared.executor.submit(self.problem, self.problem.baseline_as_candidate, options),
                self.problem,
            )
            self.recorder.baseline_verdict(self.state, verdict, _seconds(verdict, started))
        assert self.state.baseline is not None
        return self.state.baseline

    def _seeds(self) -> list[Candidate]:
        """The problem folder's hand-written candidates, stored as round 0 (each once: a resumed run skips them)."""
        proposals = seed_proposals(self.problem)
        if proposals:
            self.progress("round", {"kernel": self.label, "round": 0})
        stored = (self.recorder.proposal(self.state, p, [], 0) for p in proposals)
        return [c for c in stored if c is not None]

    def _references(self, measure: bool) -> None:
        """torch eager and torch.compile of the reference, against the same baseline: stored once per problem
        and device fingerprint, measured through the executor like any candidate when missing (or stale under
        --remeasure-references). With `measure` False only the stored ones are read (a finished kernel)."""
        config = self.options.references
        if not config.references:
            return
        since = self.recorder.run_started() if config.remeasure_references else None

        def evaluate(problem: Problem, source: str, options: EvalOptions) -> Verdict:
            return settled(self.shared.executor.submit(problem, source, options), problem)

        def announce(kind: object) -> None:
            self.progress("references", {"kernel": self.label, "reference": str(kind)})

        points = reference_points(
            self.db,
            self.problem,
            self._eval_options(ProfileWhen.NEVER),
            evaluate if measure else None,
            since,
            announce,
            references(config.compile_modes),
        )
        self.references = {kind.value: point.to_json() for kind, point in points.items()}

    def _propose(self, round_index: int, profile: dict[str, Any]) -> tuple[ProposalBatch, list[int]]:
        """Ask the provider for this round's candidates; its LLM calls are stored and charged before anything else."""
        state = self.state
        context = ProposalContext(
            problem=self.problem,
            baseline_source=self.problem.baseline_source,
            parents=state.parents,
            history=state.history_before(round_index),
            profile=profile,
            best_profile=self.profiles.best(state),
            round=round_index,
            samples=self.options.search.samples,
            device=self.device,
            cache_lookup=self.recorder.cached_call,
            on_tokens=lambda tokens: self.progress("streaming", {"kernel": self.label, "tokens": tokens}),
        )
        self.progress("round", {"kernel": self.label, "round": round_index})
        with self.shared.llm_slots:
            batch = self.provider.propose(context)
        call_ids = self.recorder.llm_calls(batch.calls, round_index)
        for call in batch.calls:
            for lesson in call.lessons:  # what the endpoint was learned to accept: said once, where it was learned
                self.progress("note", {"kernel": self.label, "text": lesson})
            self.budget.charge_call(call)
            self.progress(
                "llm",
                {
                    "kernel": self.label,
                    "tokens": 0 if call.cached else call.prompt_tokens + call.completion_tokens,
                    "cost": 0 if call.cached else call.cost_usd,
                },
            )
        return batch, call_ids

    def _evaluate_all(self, batch: list[Candidate]) -> bool:
        """Evaluate in parallel; False when a budget or the stop flag cut the batch short."""
        started = [flight for flight in map(self._submit, batch) if flight is not None]
        for flight in started:
            verdict = settled(flight.future, self.problem)
            self.recorder.verdict(self.state, flight.candidate, verdict, _seconds(verdict, flight.started))
            self.progress(
                "evaluated",
                {
                    "kernel": self.label,
                    "candidate": flight.candidate.id,
                    "status": verdict.status,
                    "speedup": verdict.speedup,
                },
            )
        return len(started) == len(batch)

    def _submit(self, candidate: Candidate) -> InFlight | None:
        """Start an evaluation unless a budget or the stop flag says no."""
        if self.shared.stop.is_set():
            return None
        reason = self.budget.try_take_candidate()
        if reason:
            self.budget_reason = reason
            return None
        self.progress(
            "evaluate",
            {"kernel": self.label, "round": candidate.round, "candidate": candidate.id, "note": candidate.note},
        )
        started = time.perf_counter()
        # a second look only where the candidate could become the best
        options = replace(self._eval_options(ProfileWhen.FASTER), second_look_above=self.state.best_speedup())
        return InFlight(candidate, self.shared.executor.submit(self.problem, candidate.source, options), started)

    def _eval_options(self, profile: ProfileWhen) -> EvalOptions:
        """The run's options, with this device's ceilings (the roofline floor is part of every decision)."""
        return replace(
            self.options.eval,
            profile=profile if self.profiling else ProfileWhen.NEVER,
            ceilings=self.shared.ceilings.get(self.device),
        )

    def _near_roofline(self) -> str:
        """Why to stop: the best runs close to the machine's floor (the profile is built only when the stop is on)."""
        if self.options.search.roofline_stop <= 0:
            return ""
        return self.state.near_floor((self.profiles.best(self.state) or {}).get("fraction_of_floor"))

    # ---- endings -----------------------------------------------------------------------------
    def _stopped(self) -> KernelResult:
        if self.shared.stop.is_set():
            return self._finish(KernelStatus.INTERRUPTED, "stopped before finishing; resume the run to continue")
        return self._finish(
            KernelStatus.BUDGET_REACHED, self.budget_reason or self.budget.reached() or "budget reached"
        )

    def _result(self, status: KernelStatus, reason: str) -> KernelResult:
        result = self.state.result(status, reason, self.recorder.review)
        result.references = dict(self.references)
        result.device = self.named_device
        return result

    def _retime(self) -> None:
        """The best accepted candidate timed again with every round, on --record-processes pairs of processes:
        when an early look accepted it (an early stop's 99.9% interval is wide and its point is the luckiest of
        the search), or when it was screened on one pair and its number of record can have the process effect
        measured (DESIGN.md section 7). A measurement like the baseline's: no candidate budget taken, but none
        started once a budget or the stop flag says no new work."""
        search = self.options.search
        pairs = search.record_processes
        several = search.retime_best and pair_plan(self.problem, self.device, pairs).count > 1  # sizes the problem
        best = self.state.retime_due(several=several)
        if best is None or best.candidate_id is None:
            return
        why_not = "the run was stopped" if self.shared.stop.is_set() else self.budget.reached()
        if why_not:
            self.state.retime_note = f"not re-timed with all rounds ({why_not}): the early look stands"
            return
        candidate = self.recorder.retime(self.state, best)
        self.progress("retime", {"kernel": self.label, "candidate": best.candidate_id})
        started = time.perf_counter()
        # Every round, nothing else changed; no profile: no prompt follows to read it.
        options = replace(self._eval_options(ProfileWhen.NEVER), sequential=False, processes=pairs)
        verdict = settled(self.shared.executor.submit(self.problem, best.source, options), self.problem)
        self.recorder.retime_verdict(self.state, best.candidate_id, candidate, verdict, _seconds(verdict, started))

    def failed(self, exc: BaseException, log: str) -> KernelResult:
        """The loop raised: this kernel ends `error` with a one-line reason (its traceback in `log`) and the
        run's other kernels go on. Nothing is re-timed: the state that raised is not trusted to go further."""
        reason = clean(f"the kernel's loop failed: {type(exc).__name__}: {exc} (traceback in {log})", 500)
        result = KernelResult(self.problem.name, KernelStatus.ERROR, reason=reason, device=self.named_device)
        try:
            result = self._result(KernelStatus.ERROR, reason)
            self.recorder.finish(result)
        except Exception:  # noqa: BLE001 - the database itself may be what failed; the table still shows it
            LOG.exception("%s: could not store the error", self.label)
        self.progress("done", {"kernel": self.label, "status": str(KernelStatus.ERROR), "speedup": result.speedup})
        return result

    def _finish(self, status: KernelStatus, reason: str) -> KernelResult:
        if status not in (KernelStatus.BUDGET_REACHED, KernelStatus.INTERRUPTED):
            self._retime()
        result = self._result(status, reason)
        self.recorder.finish(result)
        return self._done(result)

    def _done(self, result: KernelResult) -> KernelResult:
        """Tell the progress display the kernel ended, with its number of record as the table will show it."""
        data = {"kernel": self.label, "status": str(result.status), "speedup": result.speedup, "cell": result.cell()}
        self.progress("done", data)
        return result


def settled(future: Future[Verdict], problem: Problem) -> Verdict:
    """A submitted evaluation's verdict; one that raised instead (an executor's failure, a bug it provoked)
    is that candidate's `crashed` verdict, so no candidate ends its kernel's search."""
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001
        LOG.exception("%s: an evaluation raised", problem.name)
        reason = f"the evaluation ended without a verdict: {type(exc).__name__}: {exc}"
        return Verdict(status=Status.CRASHED, reason=reason, problem=problem.name)


def _seconds(verdict: Verdict, submitted: float) -> float:
    """What an evaluation row stores as its duration: the evaluation's own phases, not its wait in the
    executor's queue (with two workers and many kernels, a refusal that took milliseconds read 97 s);
    the wall time since submission only where no phase came back (an executor that failed)."""
    return verdict.elapsed if verdict.durations else time.perf_counter() - submitted
