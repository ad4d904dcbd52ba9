"""What one A/B timing of a pair of processes needs (`TimingJob`), what it gathers (`Samples`), and how it fails."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from kernel_agent.core.comparison import Comparison
from kernel_agent.core.config import EvalConfig
from kernel_agent.core.verdict import Status, StatusError
from kernel_agent.problem.oracle import CaseMaker
from kernel_agent.sandbox.host.session import Timed, WorkerFailure, WorkerSession
from kernel_agent.sandbox.host.shm import ExpectedOutput
from kernel_agent.timing.sequential import MIN_ROUNDS

Config = tuple[tuple[int, ...], str]  # (shape, dtype)


class TimingFailure(StatusError):
    """The A/B timing ended with a verdict (a failing side, tampering, a wrong audited output)."""


@contextmanager
def failures_of(role: str) -> Iterator[None]:
    """A worker failure during timing, worded for the side it came from."""
    try:
        yield
    except WorkerFailure as exc:
        status = exc.status if role == "candidate" else Status.RUNTIME_ERROR
        prefix = "during timing" if role == "candidate" else "the baseline failed during timing"
        raise TimingFailure(status, f"{prefix}: {exc.reason}") from None


@dataclass
class Samples:
    """Every timed call of one side: config -> round -> calls; and the baseline's pings, per config."""

    calls: list[list[list[Timed]]] = field(default_factory=list)
    pings: list[list[float]] = field(default_factory=list)

    def flat(self, config: int) -> list[Timed]:
        return [t for block in self.calls[config] for t in block]


@dataclass
class TimingJob:
    """What one A/B timing needs from the evaluation (it never reaches into the evaluation itself)."""

    configs: list[Config]
    maker: CaseMaker
    candidate: WorkerSession
    baseline: WorkerSession
    device: str
    threads: int
    rounds: int
    target_block_ms: float
    audit_fraction: float
    judge: Callable[[list[torch.Tensor], list[torch.Tensor], str], Comparison]  # (inputs, outputs, dtype): as a check
    expected: dict[Config, tuple[ExpectedOutput, ...]]  # each config's outputs: descriptions are held to them
    min_gain: float = EvalConfig.min_gain
    sequential: bool = False  # stop once a look settles the decision (timing/sequential.py); `rounds` is the most
    min_rounds: int = MIN_ROUNDS
    enforce_work_budget: bool = True  # False for trusted references: their excess work is recorded, not refused
    draw_on: str = "cpu"  # where timed inputs are drawn: "cuda" on the device data path (DESIGN.md section 18)
    resolution: float = 0.03  # several pairs: stop once the 95% interval is this narrow (half of it each side)
    budget_s: float = 8.0  # several pairs: stop once timing has taken this long (seconds)
