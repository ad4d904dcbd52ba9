"""The one selector interface: fitted on a variant's stored ground truth for one problem and device, a selector
ranks the configs of the pool for a shape and picks one with a confidence.

The selection `select(problem, variant, shape, device)` is `fit(train, context)` (problem, variant and device
fix the table and the context) followed by `select(shape)`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from kernel_agent.core.tuning import Shape
from kernel_agent.select.device import DeviceFacts
from kernel_agent.select.table import GroundTruth


@dataclass(frozen=True)
class Context:
    """What a selector may know besides the training rows: the problem's tunables, its cost model and the device."""

    tunables: dict[str, list[Any]]
    device: DeviceFacts
    cost_model: dict[str, str] = field(default_factory=dict)  # problem.py COST_MODEL (analytical selector)
    dtype_bytes: int = 4


@dataclass(frozen=True)
class Pick:
    config: str  # core.tuning.config_key
    confidence: float  # 0..1; the abstain rule times the top k below a threshold
    ranking: tuple[str, ...] = ()  # the pool, best predicted first
    timed: tuple[str, ...] = ()  # configs timed to decide (the abstain path), none for a pure prediction
    abstained: bool = False


class Selector(ABC):
    name = "selector"

    def fit(self, train: GroundTruth, context: Context) -> None:
        self.train, self.context = train, context
        self.seen_shapes = set(train.shapes)  # the scorer checks that no held-out shape is among them

    @abstractmethod
    def rank(self, shape: Shape) -> list[tuple[str, float]]:
        """Every config of the pool with a predicted cost (lower is better), best first."""

    def confidence(self, shape: Shape, ranking: list[tuple[str, float]]) -> float:
        """The predicted margin of the pick over the runner-up, squashed to 0..1 (a selector may know better)."""
        if len(ranking) < 2 or ranking[0][1] <= 0:
            return 1.0
        margin = ranking[1][1] / ranking[0][1] - 1.0
        return min(1.0, margin / 0.1)

    def select(self, shape: Shape) -> Pick:
        ranking = self.rank(shape)
        return Pick(ranking[0][0], self.confidence(shape, ranking), tuple(k for k, _ in ranking))
