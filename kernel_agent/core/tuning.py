"""Typed records of tuning: one timed (shape, config), and a variant's per-shape config table.

A config is stored under a canonical JSON key (sorted names), a shape as a JSON list, so rows written
by different runs compare equal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

Shape = tuple[int, ...]
Config = dict[str, Any]  # tunable name -> int | float | bool | str


class Stage(IntEnum):
    """Stage 1 times every config briefly; stage 2 re-times the top few per shape (and the default) fully."""

    SCREEN = 1
    CONFIRM = 2


TIMED = "timed"  # the status of a row with a time; any other status is the verdict's (compile_error, incorrect...)


def config_key(config: Config) -> str:
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def shape_key(shape: Shape) -> str:
    return json.dumps(list(shape), separators=(",", ":"))


def parse_config(key: str) -> Config:
    return json.loads(key)


def parse_shape(key: str) -> Shape:
    return tuple(int(v) for v in json.loads(key))


@dataclass(frozen=True)
class ConfigTime:
    """One config on one shape: its time (the median of its own side of an A/B run) with the 95% interval,
    the speedup over the problem's trusted baseline in the same run, or why it has no time."""

    shape: Shape
    dtype: str
    config: Config
    stage: Stage
    status: str
    time_ms: float | None = None
    ci_ms: tuple[float, float] | None = None
    speedup: float | None = None
    baseline_ms: float | None = None
    reason: str = ""

    @property
    def timed(self) -> bool:
        return self.status == TIMED and self.time_ms is not None

    @property
    def key(self) -> tuple[Shape, str]:
        return self.shape, config_key(self.config)


@dataclass(frozen=True)
class TunedConfig:
    """A variant's best config for one tuned shape: what an exporter's dispatcher looks up (nearest shape,
    the default config as the fallback)."""

    shape: dict[str, int]
    config: Config
    time_ms: float
