"""A variant's tunable space and a problem's shape sets: what `tune` times, read from the trusted problem.py.

`TUNE_SHAPES` train selectors and `HELDOUT_SHAPES` only score them; the two must be disjoint, and a
shape given on the command line must have as many dimensions as the problem's shapes.
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass

from kernel_agent.core.tuning import Config, Shape
from kernel_agent.problem.load import Problem


class SpaceError(ValueError):
    """A tunable space or shape set that cannot be used (one-line reason)."""


@dataclass(frozen=True)
class ShapeSets:
    train: list[Shape]
    heldout: list[Shape]
    names: tuple[str, ...]

    def named(self, shape: Shape) -> dict[str, int]:
        return dict(zip(self.names, shape))


def configs(problem: Problem) -> list[Config]:
    """Every combination of the problem's TUNABLES, in declaration order."""
    if not problem.tunables:
        raise SpaceError(f"{problem.name}: no TUNABLES in problem.py, so there is nothing to tune")
    names = list(problem.tunables)
    return [dict(zip(names, values)) for values in itertools.product(*problem.tunables.values())]


def shape_sets(problem: Problem) -> ShapeSets:
    module = problem.module
    train = _shapes(getattr(module, "TUNE_SHAPES", None) or problem.shapes, "TUNE_SHAPES", problem)
    heldout = _shapes(getattr(module, "HELDOUT_SHAPES", None) or [], "HELDOUT_SHAPES", problem)
    overlap = set(train) & set(heldout)
    if overlap:
        raise SpaceError(f"{problem.name}: shape {list(sorted(overlap)[0])} is in both TUNE_SHAPES and HELDOUT_SHAPES")
    rank = len(problem.shapes[0])
    names = tuple(getattr(module, "SHAPE_NAMES", None) or (f"d{i}" for i in range(rank)))
    if len(names) != rank:
        raise SpaceError(f"{problem.name}: SHAPE_NAMES has {len(names)} names for shapes of {rank} dimensions")
    return ShapeSets(train, heldout, names)


def chosen_shapes(problem: Problem, spec: str) -> list[Shape]:
    """`train`, `heldout`, `all`, or a list of shapes such as `[(64, 64, 64), (8, 512, 512)]`."""
    sets = shape_sets(problem)
    named = {"train": sets.train, "heldout": sets.heldout, "all": [*sets.train, *sets.heldout]}
    if spec in named:
        if not named[spec]:
            raise SpaceError(f"{problem.name}: no {spec} shapes declared (HELDOUT_SHAPES in problem.py)")
        return named[spec]
    try:
        value = ast.literal_eval(spec)
    except (ValueError, SyntaxError):
        raise SpaceError(f"--shapes {spec!r}: not train, heldout, all or a list of shapes like [(64, 64)]") from None
    if isinstance(value, tuple) and value and all(isinstance(v, int) for v in value):
        value = [value]
    return _shapes(value, "--shapes", problem)


def _shapes(value: object, what: str, problem: Problem) -> list[Shape]:
    rank = len(problem.shapes[0])
    if not isinstance(value, (list, tuple)):
        raise SpaceError(f"{problem.name}: {what} must be a list of shapes")
    shapes: list[Shape] = []
    for item in value:
        if (
            not isinstance(item, (list, tuple))
            or len(item) != rank
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in item)
        ):
            raise SpaceError(f"{problem.name}: {what} entry {item!r} is not a shape of {rank} positive integers")
        if tuple(item) not in shapes:
            shapes.append(tuple(item))
    return shapes
