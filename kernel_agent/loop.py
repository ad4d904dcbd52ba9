"""One kernel's optimization loop: baseline, then rounds of propose -> dedupe -> evaluate -> keep the best.

Every step is stored before the next one starts (DESIGN.md section 8), so the
database always tells the whole story of a kernel, and a killed run loses at
most the evaluation in flight.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernel_agent.db import store
from kernel_agent.db.session import Database
from kernel_agent.evaluate import EvalOptions, evaluate, run_device
from kernel_agent.problem import Problem
from kernel_agent.providers.base import Attempt, Proposal, ProposalContext, Provider
from kernel_agent.verdict import Verdict


@dataclass
class LoopOptions:
    rounds: int = 3
    samples: int = 4
    beam: int = 2
    patience: int = 2
    eval: EvalOptions = field(default_factory=EvalOptions)


@dataclass
class KernelResult:
    name: str
    status: str  # improved, no_gain, needs_gpu, baseline_failed, provider_failed
    baseline_ms: float | None = None
    best_ms: float | None = None
    speedup: float | None = None
    best_candidate: int | None = None
    reason: str = ""
    evaluated: int = 0
    accepted: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "status": self.status, "baseline_ms": self.baseline_ms, "best_ms": self.best_ms,
            "speedup": self.speedup, "best_candidate": self.best_candidate, "reason": self.reason,
        }


Progress = Callable[[str, dict[str, Any]], None]


def _no_progress(event: str, data: dict[str, Any]) -> None:
    pass


@dataclass
class KernelLoop:
    db: Database
    run_id: int
    problem: Problem
    provider: Provider
    options: LoopOptions
    progress: Progress = _no_progress

    def __post_init__(self) -> None:
        self.problem_id = store.ensure_problem(self.db, self.problem)
        self.run_kernel_id = store.add_run_kernel(self.db, self.run_id, self.problem_id)
        self.baseline_source = self.problem.baseline_source
        self.history: list[Attempt] = []
        self.parents: list[Attempt] = []
        self.sources: dict[int, str] = {}
        self.medians: dict[int, float | None] = {}  # candidate id -> its measured median ms

    # ---- steps -------------------------------------------------------------------
    def _evaluate(self, candidate_id: int, source: str) -> Verdict:
        started = time.perf_counter()
        verdict = evaluate(self.problem, source, self.options.eval)
        store.add_evaluation(self.db, candidate_id, verdict, time.perf_counter() - started)
        return verdict

    def measure_baseline(self) -> Verdict:
        """The baseline against itself: its time, spread and correctness under the same protocol."""
        candidate_id = store.add_candidate(
            self.db, run_id=self.run_id, run_kernel_id=self.run_kernel_id, problem_id=self.problem_id, source=self.baseline_source,
            baseline_source=self.baseline_source, parent_id=None, parent_source=None, origin="baseline", round=0, note="the problem's baseline",
        )
        self.baseline_id = candidate_id
        self.sources[candidate_id] = self.baseline_source
        self.progress("baseline", {"kernel": self.problem.name})
        return self._evaluate(candidate_id, self.baseline_source)

    def _profile(self, verdict: Verdict) -> dict[str, Any]:
        try:
            from kernel_agent.profile import build_profile

            return build_profile(self.problem, verdict.timing, run_device(self.problem, self.options.eval.device), None)
        except Exception as exc:  # noqa: BLE001 - a profile is advice; never let it stop the loop
            return {"error": f"profile unavailable: {type(exc).__name__}: {exc}"}

    def _record(self, proposal: Proposal, call_ids: list[int], round_index: int) -> tuple[int | None, str | None]:
        """Store one proposal; return (candidate id to evaluate, its source) or (None, None)."""
        call_id = call_ids[proposal.llm_call_index] if proposal.llm_call_index is not None and proposal.llm_call_index < len(call_ids) else None
        parent = self.parents[0] if self.parents else None
        parent_id = parent.candidate_id if parent else self.baseline_id
        parent_source = parent.source if parent else self.baseline_source
        common = dict(run_id=self.run_id, run_kernel_id=self.run_kernel_id, problem_id=self.problem_id, baseline_source=self.baseline_source, round=round_index)
        if proposal.source is None:
            store.add_candidate(self.db, source=None, parent_id=parent_id, parent_source=None, origin=proposal.origin, note=proposal.note,
                                parse_error=proposal.parse_error, llm_call_id=call_id, **common)
            self.history.append(Attempt(None, "", "unparseable", proposal.parse_error or "no candidate in the reply", None, proposal.note, round_index))
            return None, None
        if store.find_candidate(self.db, self.run_kernel_id, proposal.source) is not None:
            self.history.append(Attempt(None, proposal.source, "duplicate", "same code as an earlier candidate", None, proposal.note, round_index))
            return None, None
        candidate_id = store.add_candidate(self.db, source=proposal.source, parent_id=parent_id, parent_source=parent_source, origin=proposal.origin,
                                           note=proposal.note, llm_call_id=call_id, **common)
        self.sources[candidate_id] = proposal.source
        return candidate_id, proposal.source

    # ---- the loop -------------------------------------------------------------------
    def run(self) -> KernelResult:
        name = self.problem.name
        store.update_run_kernel(self.db, self.run_kernel_id, status="running")
        baseline = self.measure_baseline()
        result = KernelResult(name=name, status="no_gain", evaluated=1)
        if not baseline.passed:
            return self._finish(result, "baseline_failed", f"the baseline does not verify: {baseline.status}: {baseline.reason}")
        if baseline.interpreted:
            return self._finish(result, "needs_gpu", "verified under the Triton interpreter; timing (and so optimization) needs a GPU")
        result.baseline_ms = (baseline.timing or {}).get("baseline", {}).get("median_ms")
        store.update_run_kernel(self.db, self.run_kernel_id, baseline_ms=result.baseline_ms)
        profile = self._profile(baseline)
        stale_rounds = 0
        for round_index in range(1, self.options.rounds + 1):
            context = ProposalContext(
                problem=self.problem, baseline_source=self.baseline_source, parents=list(self.parents), history=list(self.history),
                profile=profile, round=round_index, samples=self.options.samples, device=run_device(self.problem, self.options.eval.device),
                cache_lookup=lambda key: store.cached_call(self.db, key),
            )
            self.progress("round", {"kernel": name, "round": round_index})
            batch = self.provider.propose(context)
            call_ids = [store.add_llm_call(self.db, call, self.run_id, self.run_kernel_id, round_index) for call in batch.calls]
            failed_calls = [c.error for c in batch.calls if c.error]
            if failed_calls and not batch.proposals:
                return self._finish(result, "provider_failed", f"the provider failed: {failed_calls[-1]}")
            if not batch.proposals and batch.exhausted:
                break
            best_before = self.parents[0].speedup if self.parents else 1.0
            for proposal in batch.proposals:
                candidate_id, source = self._record(proposal, call_ids, round_index)
                if candidate_id is None or source is None:
                    continue
                self.progress("evaluate", {"kernel": name, "round": round_index, "candidate": candidate_id, "note": proposal.note})
                verdict = self._evaluate(candidate_id, source)
                result.evaluated += 1
                self.medians[candidate_id] = (verdict.timing or {}).get("candidate", {}).get("median_ms")
                attempt = Attempt(candidate_id, source, verdict.status, verdict.reason, verdict.speedup, proposal.note, round_index)
                self.history.append(attempt)
                if verdict.status == "faster":
                    result.accepted += 1
                    self.parents = sorted([*self.parents, attempt], key=lambda a: a.speedup or 0.0, reverse=True)[: self.options.beam]
                    self._store_best()
                self.progress("evaluated", {"kernel": name, "candidate": candidate_id, "status": verdict.status, "speedup": verdict.speedup})
            store.update_run_kernel(self.db, self.run_kernel_id, rounds_done=round_index)
            best_now = self.parents[0].speedup if self.parents else 1.0
            stale_rounds = 0 if (best_now or 0) > (best_before or 0) else stale_rounds + 1
            if stale_rounds >= self.options.patience:
                break
        if self.parents:
            best = self.parents[0]
            result.speedup, result.best_candidate = best.speedup, best.candidate_id
            result.best_ms = self.medians.get(best.candidate_id) if best.candidate_id is not None else None
            return self._finish(result, "improved", "")
        return self._finish(result, "no_gain", "no candidate was verifiably faster than the baseline")

    def _store_best(self) -> None:
        best = self.parents[0]
        store.update_run_kernel(self.db, self.run_kernel_id, best_candidate_id=best.candidate_id, best_speedup=best.speedup)

    def _finish(self, result: KernelResult, status: str, reason: str) -> KernelResult:
        result.status, result.reason = status, reason
        store.update_run_kernel(self.db, self.run_kernel_id, status=status, reason=reason, best_ms=result.best_ms)
        self.progress("done", {"kernel": result.name, "status": status, "speedup": result.speedup})
        return result
