"""Ground truth per shape (DESIGN.md section 14): every config of a variant's tunable space timed on a shape set, in the
sandbox, two-stage, stored row by row so that selectors are scored from the stored rows alone."""

from __future__ import annotations

from typing import Any

__all__ = ["tune"]


def __getattr__(name: str) -> Any:
    if name == "tune":
        from kernel_agent.tune.ground_truth import tune

        return tune
    raise AttributeError(name)
