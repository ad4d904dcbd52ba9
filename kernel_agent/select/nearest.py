"""Nearest measured shape in log space: the convention of tuned-config JSON files in the Hugging Face kernels
ecosystem (a shape not in the file takes the config of the closest one that is)."""

from __future__ import annotations

import math

from kernel_agent.core.tuning import Shape
from kernel_agent.select.base import Selector

AGREEMENT_SHAPES = 3  # confidence: on how many of the nearest shapes the pick is (nearly) the best
AGREEMENT_TOLERANCE = 0.03


def log_distance(a: Shape, b: Shape) -> float:
    return math.sqrt(sum((math.log2(x) - math.log2(y)) ** 2 for x, y in zip(a, b)))


class NearestShape(Selector):
    name = "nearest"

    def neighbours(self, shape: Shape) -> list[Shape]:
        timed = [s for s in self.train.shapes if self.train.times.get(s)]
        return sorted(timed, key=lambda s: (log_distance(shape, s), s))

    def rank(self, shape: Shape) -> list[tuple[str, float]]:
        """Configs by their time relative to the best at the nearest shape; configs without a time there come
        after, in the order of the next nearest shape that has one."""
        order = self.neighbours(shape)
        scored = []
        for key in self.train.pool:
            for depth, near in enumerate(order):
                ms = self.train.time_of(near, key)
                if ms is not None:
                    scored.append((key, depth * 1e6 + ms / self.train.best_ms(near)))
                    break
            else:
                scored.append((key, math.inf))
        return sorted(scored, key=lambda item: item[1])

    def confidence(self, shape: Shape, ranking: list[tuple[str, float]]) -> float:
        pick = ranking[0][0]
        near = self.neighbours(shape)[:AGREEMENT_SHAPES]
        agree = 0
        for s in near:
            ms = self.train.time_of(s, pick)
            agree += ms is not None and ms <= self.train.best_ms(s) * (1 + AGREEMENT_TOLERANCE)
        return agree / max(1, len(near))
