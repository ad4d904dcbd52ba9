"""Time every config of a variant on a shape set, two-stage, through the trusted evaluation path.

Each config is one `evaluate()` of the variant with that config written in, over all the shapes it
still needs: one candidate sandbox per config (a C++ config is compiled once, into the content-addressed
build store), verified on every check and tuning shape, then A/B-timed shape by shape against the
problem's own baseline in its own sandbox. The variant may be LLM-written, so nothing of it runs here.

Stage 1 (screen) times every config with a short budget (`quick_rounds`); stage 2 (confirm) re-times the
top `top` configs of each shape and the default with the full protocol. Rows are stored as each config
finishes, and a (shape, config, stage) already stored is never timed again: a killed tune resumes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kernel_agent.core.config import ProfileWhen
from kernel_agent.core.tuning import TIMED, Config, ConfigTime, Shape, Stage, config_key, parse_config
from kernel_agent.core.verdict import Verdict
from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import Problem
from kernel_agent.propose.tunables import TunableError, apply_config, read_config
from kernel_agent.tune.space import configs

SCREEN_SEEDS = 2  # cases per check shape in stage 1; stage 2 re-verifies its configs with the full plan


@dataclass(frozen=True)
class TunePlan:
    shapes: list[Shape]
    dtype: str
    quick_rounds: int = 2
    full_rounds: int = 10
    top: int = 3
    group: int = 0  # shapes per evaluation (0: all): a rejection (a timer-rule trip on one shape) fails its group only


class Store(Protocol):
    """Where rows go as they are measured (the database, or a list in tests)."""

    def stored(self) -> list[ConfigTime]: ...

    def put(self, rows: list[ConfigTime]) -> None: ...


Progress = Callable[[str], None]


def tune(
    problem: Problem,
    variant: str,
    plan: TunePlan,
    options: EvalOptions,
    store: Store,
    progress: Progress = lambda _: None,
) -> list[ConfigTime]:
    """Both stages; returns every row stored for this plan's shapes (earlier runs' included)."""
    space = configs(problem)
    default = default_config(problem, variant)
    rows = _done(store)
    for index, config in enumerate(space, 1):
        missing = [s for s in plan.shapes if (s, config_key(config), Stage.SCREEN) not in rows]
        for shapes in _groups(missing, plan.group):
            progress(f"screen {index}/{len(space)}: {_label(config)} on {len(shapes)} shape(s)")
            _record(store, rows, time_config(problem, variant, config, shapes, plan, Stage.SCREEN, options))
    for config, shapes in confirm_plan(rows, plan, default).items():
        missing = [s for s in shapes if (s, config, Stage.CONFIRM) not in rows]
        for group in _groups(missing, plan.group):
            progress(f"confirm: {_label(config)} on {len(group)} shape(s)")
            _record(
                store, rows, time_config(problem, variant, parse_config(config), group, plan, Stage.CONFIRM, options)
            )
    return [row for row in rows.values() if row.shape in plan.shapes and row.dtype == plan.dtype]


def default_config(problem: Problem, variant: str) -> Config:
    """The variant's own values of the tunables (the config it ships with)."""
    try:
        return read_config(variant, list(problem.tunables))
    except TunableError as exc:
        raise ValueError(f"{problem.name}: the variant does not carry its tunables: {exc}") from None


def confirm_plan(rows: dict, plan: TunePlan, default: Config) -> dict[str, list[Shape]]:
    """Stage 2: per shape, the `top` fastest screened configs and the default, grouped by config."""
    wanted: dict[str, list[Shape]] = {}
    for shape in plan.shapes:
        screened = sorted(
            (r for (s, _, stage), r in rows.items() if s == shape and stage == Stage.SCREEN and r.timed),
            key=lambda r: r.time_ms,
        )
        if not screened:
            continue
        keys = [config_key(r.config) for r in screened[: plan.top]]
        if config_key(default) not in keys:
            keys.append(config_key(default))
        for key in keys:
            wanted.setdefault(key, []).append(shape)
    return wanted


def time_config(
    problem: Problem,
    variant: str,
    config: Config,
    shapes: list[Shape],
    plan: TunePlan,
    stage: Stage,
    options: EvalOptions,
) -> list[ConfigTime]:
    """One sandboxed evaluation of the variant with `config`, over `shapes`: one row per shape."""
    try:
        source = apply_config(variant, config)
    except TunableError as exc:
        return [ConfigTime(s, plan.dtype, config, stage, "compile_error", reason=str(exc)) for s in shapes]
    sub = dataclasses.replace(problem, shapes=list(shapes), dtypes=[plan.dtype])
    rounds = plan.quick_rounds if stage == Stage.SCREEN else plan.full_rounds
    seeds = SCREEN_SEEDS if stage == Stage.SCREEN else options.seeds_per_shape
    verdict = evaluate(
        sub,
        source,
        dataclasses.replace(  # a measurement per config, not a decision: no second look (a screen stays quick)
            options, timing_rounds=rounds, seeds_per_shape=seeds, profile=ProfileWhen.NEVER, second_look=1
        ),
    )
    return rows_of(verdict, config, shapes, plan.dtype, stage)


def rows_of(verdict: Verdict, config: Config, shapes: list[Shape], dtype: str, stage: Stage) -> list[ConfigTime]:
    """A verdict as rows: each timed shape's median and interval, or the verdict's status and reason for all."""
    per_shape = {tuple(e.shape): e for e in (verdict.timing.per_shape if verdict.timing else [])}
    if not verdict.passed or not per_shape:
        status = verdict.status if not verdict.passed else "untimed"
        return [ConfigTime(s, dtype, config, stage, status, reason=verdict.reason) for s in shapes]
    rows = []
    for shape in shapes:
        entry = per_shape.get(tuple(shape))
        if entry is None:
            rows.append(ConfigTime(shape, dtype, config, stage, "untimed", reason="no timing for this shape"))
            continue
        ms, speedup = entry.candidate_median_ms, entry.speedup
        low, high = entry.speedup_ci or (speedup, speedup)
        ci = (ms * speedup / high, ms * speedup / low)  # the speedup's interval, as the candidate's time
        rows.append(ConfigTime(shape, dtype, config, stage, TIMED, ms, ci, speedup, entry.baseline_median_ms))
    return rows


def _groups(shapes: list[Shape], size: int) -> list[list[Shape]]:
    if not shapes:
        return []
    size = size if size > 0 else len(shapes)
    return [shapes[i : i + size] for i in range(0, len(shapes), size)]


def _done(store: Store) -> dict[tuple[Shape, str, Stage], ConfigTime]:
    return {(r.shape, config_key(r.config), r.stage): r for r in store.stored()}


def _record(store: Store, rows: dict, new: list[ConfigTime]) -> None:
    store.put(new)
    for row in new:
        rows[(row.shape, config_key(row.config), row.stage)] = row


def _label(config: Config | str) -> str:
    parsed = parse_config(config) if isinstance(config, str) else config
    return " ".join(f"{k}={v}" for k, v in parsed.items())
