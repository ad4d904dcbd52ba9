"""Ground truth as a table: per shape, each config's time (a stored `tune` row's), the failures, the default.

Each (shape, config) keeps its row of the highest stage (the fully timed one when it was confirmed). Times
are put on one scale per shape: the shape's median baseline time over all rows divided by the row's speedup
over the baseline in its own A/B run, so the drift of a shared machine between two configs' runs (each
config is a separate evaluation) cancels the way it does in a speedup.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernel_agent.core.tuning import Config, ConfigTime, Shape, TunedConfig, config_key, parse_config

if TYPE_CHECKING:
    from kernel_agent.db.session import Database
    from kernel_agent.db.tuning import VariantKey


@dataclass
class GroundTruth:
    times: dict[Shape, dict[str, float]] = field(default_factory=dict)  # shape -> config key -> ms
    failed: dict[Shape, dict[str, str]] = field(default_factory=dict)  # shape -> config key -> status
    pool: list[str] = field(default_factory=list)  # every config key, in first-seen order
    default: str | None = None

    @classmethod
    def from_rows(cls, rows: list[ConfigTime], default: Config | None = None) -> GroundTruth:
        latest: dict[tuple[Shape, str], ConfigTime] = {}
        for row in rows:
            held = latest.get(row.key)
            if held is None or row.stage > held.stage:
                latest[row.key] = row
        table = cls(default=None if default is None else config_key(default))
        baselines: dict[Shape, list[float]] = {}
        for row in latest.values():
            if row.timed and row.baseline_ms:
                baselines.setdefault(row.shape, []).append(row.baseline_ms)
        for (shape, key), row in latest.items():
            if key not in table.pool:
                table.pool.append(key)
            if row.timed:
                assert row.time_ms is not None
                ms = row.time_ms
                if row.speedup and shape in baselines:
                    ms = statistics.median(baselines[shape]) / row.speedup
                table.times.setdefault(shape, {})[key] = ms
            else:
                table.failed.setdefault(shape, {})[key] = row.status
        return table

    @property
    def shapes(self) -> list[Shape]:
        return sorted(set(self.times) | set(self.failed))

    def best(self, shape: Shape) -> str | None:
        timed = self.times.get(shape) or {}
        return min(timed, key=timed.__getitem__) if timed else None

    def best_ms(self, shape: Shape) -> float:
        return min(self.times[shape].values())

    def time_of(self, shape: Shape, key: str) -> float | None:
        return (self.times.get(shape) or {}).get(key)

    def subset(self, shapes: list[Shape]) -> GroundTruth:
        keep = set(shapes)
        return GroundTruth(
            {s: dict(t) for s, t in self.times.items() if s in keep},
            {s: dict(f) for s, f in self.failed.items() if s in keep},
            list(self.pool),
            self.default,
        )


def tuned_configs(db: Database, key: VariantKey, names: tuple[str, ...]) -> list[TunedConfig]:
    """The variant's per-shape config table on this device: each tuned shape's fastest config (an exporter's
    input; `names` label the shape's dimensions)."""
    from kernel_agent.db.tuning import stored_times  # the database is optional where only `eval` runs

    table = GroundTruth.from_rows(stored_times(db, key))
    return [
        TunedConfig(dict(zip(names, shape)), parse_config(best), table.times[shape][best])
        for shape in table.shapes
        if (best := table.best(shape)) is not None
    ]
