"""Budgets: how much a run (and each kernel in it) may spend.

Counters are shared across kernel threads. A reached budget stops new work
(no new LLM request, no new evaluation); work already in flight finishes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kernel_agent.optimize.config import BudgetLimits
from kernel_agent.propose.base import LLMCall

__all__ = ["Budget", "BudgetLimits"]


class Budget:
    """Spent so far in one scope (the run, or one kernel); a kernel's budget charges its run's too."""

    def __init__(
        self,
        limits: BudgetLimits,
        scope: str,
        parent: Budget | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.clock = clock
        self.scope = scope
        self.parent = parent
        self.candidates = 0
        self.tokens = 0
        self.cost = 0.0
        self.started = clock()
        self._lock = threading.Lock()

    def charge_call(self, call: LLMCall) -> None:
        """Count what an LLM call cost; replies served from the cache cost nothing."""
        if call.cached:
            return
        with self._lock:
            self.tokens += call.prompt_tokens + call.completion_tokens
            self.cost += call.cost_usd
        if self.parent:
            self.parent.charge_call(call)

    def try_take_candidate(self) -> str | None:
        """Reserve one evaluation; return the reason when no budget is left."""
        reason = self.reached()
        if reason:
            return reason
        with self._lock:
            if self.limits.max_candidates is not None and self.candidates >= self.limits.max_candidates:
                return self._reason(
                    "candidates",
                    f"{self.candidates} candidates evaluated (--max-candidates {self.limits.max_candidates})",
                )
            self.candidates += 1
        if self.parent:
            reason = self.parent.try_take_candidate()
            if reason:
                with self._lock:
                    self.candidates -= 1
                return reason
        return None

    def reached(self) -> str | None:
        """Why no new work may start, or None."""
        limits = self.limits
        with self._lock:
            if limits.max_candidates is not None and self.candidates >= limits.max_candidates:
                return self._reason(
                    "candidates", f"{self.candidates} candidates evaluated (max {limits.max_candidates})"
                )
            if limits.token_budget is not None and self.tokens >= limits.token_budget:
                return self._reason("tokens", f"{self.tokens} tokens used (max {limits.token_budget})")
            if limits.max_cost is not None and self.cost >= limits.max_cost:
                return self._reason("cost", f"${self.cost:.4f} spent (max ${limits.max_cost:.4f})")
            elapsed = self.clock() - self.started
            if limits.time_limit is not None and elapsed >= limits.time_limit:
                return self._reason("time", f"{elapsed:.0f} s elapsed (limit {limits.time_limit:.0f} s)")
        return self.parent.reached() if self.parent else None

    def _reason(self, kind: str, detail: str) -> str:
        return f"{self.scope} budget reached: {detail}"
