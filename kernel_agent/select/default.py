"""The reference every selector is measured against: the variant's default config for every shape (what
kernel-agent did before per-shape selection)."""

from __future__ import annotations

from kernel_agent.core.tuning import Shape
from kernel_agent.select.base import Selector


class DefaultConfig(Selector):
    name = "default"

    def rank(self, shape: Shape) -> list[tuple[str, float]]:
        default = self.train.default
        return [(key, 0.0 if key == default else 1.0) for key in sorted(self.train.pool, key=lambda k: k != default)]

    def confidence(self, shape: Shape, ranking: list[tuple[str, float]]) -> float:
        return 1.0
