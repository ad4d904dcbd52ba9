"""What a `regions` run is asked (`RegionsPlan`), each region found and what became of it (`Region`), and what
the run gives back (`RegionsOutcome`): the records the cut, the run and the tables share."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_agent.regions.compiled import CompileReading
from kernel_agent.regions.program import Matched, op_names


@dataclass
class RegionsPlan:
    recipe: str
    size: str = "small"
    out: Path = Path("regions-out")
    granularity: str = "auto"
    top: int | None = None
    min_share: float = 0.0
    capture: str = "auto"
    rounds: int = 20
    weights: bool = False
    time_shares: bool = True
    index_dist: str = "uniform"  # or zipf:A, for the index inputs of embedding regions
    ceilings: Any = None  # measure.profile.Ceilings the CLI read from the database; None: measured here
    device: str = "cpu"  # where the shares are timed: cpu (host clock around each op) or cuda (kernel device time)
    compile: bool = False  # also time each emitted region's reference under torch.compile (--compile)


@dataclass
class Region:
    """A signature's instances across the model, and what became of it."""

    id: str
    kind: str
    slug: str
    cls: str
    instances: list[Matched]
    priority: int = 9
    selected: list[Matched] = field(default_factory=list)
    why: str = ""
    emitted: bool = False
    folder: str = ""
    share: dict[str, list[float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    flops: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    headroom: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    trimmed_from: str = ""  # for a trimmed region: the region whose free ops it is
    compiled: dict[str, CompileReading] = field(default_factory=dict)  # label -> torch.compile vs eager
    hook_share: dict[str, list[float]] = field(default_factory=dict)  # label -> share timed by hooks in the model
    bind: dict[str, Any] = field(default_factory=dict)  # a module region's binding (regions/bind.py), or why none

    @property
    def ops(self) -> list[str]:
        return op_names(self.instances[0].programs[0])

    @property
    def binding(self) -> str:
        """How the next step can swap a winner back: B1 a module's forward, B2 a parent of sibling modules, B3 a
        graph swap (a chain in a parent's code or crossing modules)."""
        return {"module": "B1", "horizontal": "B2"}.get(self.kind, "B3")

    def mean_share(self, labels: list[str]) -> float | None:
        values = [self.share[label][0] for label in labels if label in self.share]
        return sum(values) / len(values) if values else None


@dataclass
class RegionsOutcome:
    recipe: str
    size: str
    granularity: str
    capture: str
    torch_version: str
    captures: list[dict[str, str]]
    axes: dict[str, list[int]]
    regions: list[Region]
    errors: list[str]
    replay: dict[str, dict[str, Any]]  # per label: the replayed and eager forward times, or why refused
    coverage: dict[str, float]
    bound: dict[str, dict[str, float | None]]
    coverage_interval: dict[str, list[float]] = field(default_factory=dict)
