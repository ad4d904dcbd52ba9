"""The roofline profile a prompt shows: the baseline's (from its A/A run) and the current best's.

Advice only: a profile that cannot be built says why in its `error` and never stops the loop. The
best's profile is built once per best candidate, since every later round shows it again.
"""

from __future__ import annotations

from typing import Any

from kernel_agent.core.verdict import Verdict
from kernel_agent.optimize.search_state import SearchState
from kernel_agent.problem.load import Problem


class PromptProfiles:
    def __init__(self, problem: Problem, ceilings: Any) -> None:
        self.problem = problem
        self.ceilings = ceilings  # measure.ceilings.Ceilings of this device, or None
        self.built: dict[int, dict[str, Any]] = {}  # best candidate id -> its profile

    def of(self, verdict: Verdict, role: str) -> dict[str, Any]:
        """One timed side of a verdict: the baseline of an A/A run, or a candidate."""
        breakdown = verdict.profile if verdict.profile and "error" not in verdict.profile else None
        try:
            from kernel_agent.measure.profile import build_profile

            return build_profile(self.problem, verdict.timing, self.ceilings, role=role, breakdown=breakdown)
        except Exception as exc:  # noqa: BLE001 - a profile is advice; never let it stop the loop
            return {"error": f"profile unavailable: {type(exc).__name__}: {exc}"}

    def best(self, state: SearchState) -> dict[str, Any] | None:
        """The current best's profile (None while the baseline is the best)."""
        parents = state.parents
        key = parents[0].candidate_id if parents else None
        if key is None or key not in state.accepted:
            return None
        if key not in self.built:
            self.built[key] = self.of(state.accepted[key], role="candidate")
        return self.built[key]
