"""What comparing a candidate's outputs with the references returns: the tolerance used, and why an output
failed. Records only; the rules are `evaluate/compare.py`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Tolerance:
    rtol: float
    atol: float
    norm: float


@dataclass
class Mismatch:
    """Why one output failed, with the first bad index and magnitudes for the author."""

    check: str
    output: int
    message: str
    index: list[int] | None = None
    got: float | None = None
    expected: float | None = None
    max_abs_error: float | None = None

    def line(self) -> str:
        return f"output {self.output}: {self.message}"


@dataclass
class Comparison:
    passed: bool
    mismatch: Mismatch | None = None
    max_abs_error: float = 0.0
    rel_norm_error: float = 0.0
    base_max_abs_error: float = 0.0  # the same-dtype reference's own, over its finite elements
    reference_nonfinite: int = 0  # elements judged against the gold alone: the same-dtype reference not finite
    details: list[dict[str, Any]] = field(default_factory=list)
