"""Many kernels, rounds of proposals: the options, the search, its records, budgets, where evaluations run, and resume.

config (every option of a run, stored as its plan) -> run (kernel lists, manifests, the batch) ->
kernel_loop (one kernel, top to bottom) over search_state (pure policy), recorder (the database),
prompt_profile, budget, executors/.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KernelSpec", "RunPlan", "expand_paths"]


def __getattr__(name: str) -> Any:
    """Import on first use: the sandbox worker and the GPU machine import parts of this package alone."""
    if name in ("KernelSpec", "RunPlan"):
        from kernel_agent.optimize import config

        return getattr(config, name)
    if name in __all__:
        from kernel_agent.optimize import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
