"""One evaluation's fixed facts: what it evaluates, where it runs, under which limits and allowance.

Every phase of an evaluation reads these and writes none of them: the phases return records
(`Preparation`, `CheckReport`, `TimingOutcome`) and one function assembles the verdict from them.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from kernel_agent.core.config import EvalConfig, GpuData, ProfileWhen
from kernel_agent.evaluate.backends.base import BuildContext
from kernel_agent.evaluate.canaries import LOAD_AUDIT_BYTES
from kernel_agent.evaluate.device_lock import DeviceGate, NoGate
from kernel_agent.problem.footprint import Footprint, largest_footprint
from kernel_agent.problem.load import Problem
from kernel_agent.sandbox.deadline import Deadline
from kernel_agent.sandbox.host.isolation import Isolation, Limits
from kernel_agent.sandbox.host.shm import nbytes

CPU_PER_TIMEOUT = 2.5  # a sandbox's RLIMIT_CPU: this x the timeout x its threads (+10 s)


@dataclass
class EvalOptions(EvalConfig):
    """The evaluation's whole option set: what a user chooses (`EvalConfig`, declared once with its
    defaults and help) and what the harness sets on top."""

    target_block_ms: float = 100.0
    seeds_per_shape: int = 5
    build_store: Path | None = None
    limits: Limits = field(default_factory=Limits)
    audit_fraction: float = 0.2
    ceilings: Any = field(
        default=None, repr=False
    )  # measure.ceilings.Ceilings of this device: the roofline floor enters the decision
    profile: ProfileWhen = ProfileWhen.NEVER  # torch.profiler inside the sandbox after timing
    profile_calls: int = 3
    gate: DeviceGate | NoGate = field(default_factory=NoGate, repr=False)  # shared by parallel evaluations
    trusted_source: bool = False  # a reference point (never candidate code): its work budget is recorded only
    second_look_above: float = 1.0  # a second look only for a point above this too (the search's best so far)

    def __post_init__(self) -> None:
        if self.threads is None:  # "all cores", resolved here: the sandbox and the fingerprint need a number
            self.threads = os.cpu_count() or 1

    @classmethod
    def from_config(cls, config: EvalConfig, **harness: Any) -> EvalOptions:
        """The user's choices (from the CLI or a stored plan), then the harness's settings over them."""
        return cls(**{**{f.name: getattr(config, f.name) for f in fields(EvalConfig)}, **harness})


_SIZED: dict[tuple, object] = {}


def sized(problem: Problem) -> Footprint | None:
    """The problem's largest footprint, computed once per problem file (None if it cannot be built)."""
    key = (str(problem.module_path), problem.module_path.stat().st_mtime, "footprint")
    if key not in _SIZED:
        try:
            _SIZED[key] = largest_footprint(problem)
        except Exception:  # noqa: BLE001 - refusal() reports why; here it only sizes a warm-up
            _SIZED[key] = None
    return _SIZED[key]  # type: ignore[return-value]


def run_device(problem: Problem, requested: str) -> str:
    """Where the candidate runs: CPU problems on CPU; GPU problems on a GPU when there is one."""
    if problem.device == "cpu":
        return "cpu"
    if requested == "cpu":
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class EvalContext:
    problem: Problem
    source: str
    options: EvalOptions
    device: str
    isolation: Isolation
    sandbox_root: Path
    root: Path  # this evaluation's folder: cand/ and base/, one for each side
    candidate_time: Deadline  # the build and the candidate's first process share it
    booked: int = 0  # host memory booked for it (its footprint): each sandbox is held to it
    footprint: Footprint | None = None
    gold_fits: bool = True  # the largest case's float64 gold fits the memory budget

    @property
    def workdir(self) -> Path:
        return self.root / "cand"

    @property
    def device_data(self) -> bool:
        """Timed calls' data stays on the device (`--gpu-data device` on a GPU; DESIGN.md section 18)."""
        return self.device == "cuda" and self.options.gpu_data == GpuData.DEVICE

    @property
    def baseline_dir(self) -> Path:
        return self.root / "base"  # as long as cand: a path's length shifts the heap (session.ROLE_TAGS)

    def problem_dir(self) -> Path:
        return self.problem.path if self.problem.path.is_dir() else self.problem.path.parent

    def build_context(self, deadline: Deadline) -> BuildContext:
        """Builds run under the evaluation's limits and never past their side's `deadline`."""
        from kernel_agent.cpp import default_store

        return BuildContext(
            store=self.options.build_store or default_store(),
            isolation=self.isolation,
            sandbox_root=self.sandbox_root,
            deadline=deadline,
            limits=self.options.limits,
        )

    def limits(self) -> Limits:
        """The sandbox's rlimits. CPU seconds from the timeout and the threads (a process lives through its
        checks and its timing, each within the timeout, on `threads` cores). The data limit no larger than the
        evaluation's booking (+1 GiB for the interpreter and torch) on a CPU: where no memory cgroup bounds it,
        that is the bound; on a GPU the driver's reservations count against RLIMIT_DATA, and it stays."""
        limits = self.options.limits
        cpu = math.ceil(CPU_PER_TIMEOUT * self.options.timeout * max(1, self.options.threads or 1)) + 10
        limits = dataclasses.replace(limits, cpu_seconds=cpu)
        if self.device != "cpu" or not self.booked or limits.data_bytes is None:
            return limits
        return dataclasses.replace(limits, data_bytes=min(limits.data_bytes, self.booked + (1 << 30)))

    def gold_here(self, inputs: list[torch.Tensor]) -> bool:
        """The float64 gold for this case: wherever the largest case's gold fits the budget; else only where
        this case's share of that gold, scaled by its inputs, stays under 256 MiB (a native problem's small
        check shapes). Small inputs alone do not make a small gold: level1/60's 54 MB of inputs give 0.8 GB of
        outputs and an 8 GB float64 column buffer, which the booking without the gold left out."""
        footprint = self.footprint
        if self.gold_fits or footprint is None:
            return True
        gold_bytes = footprint.needed - footprint.needed_without_gold
        return gold_bytes * nbytes(inputs) <= LOAD_AUDIT_BYTES * max(1, footprint.inputs)

    def prefault_bytes(self) -> int:
        """Heap each worker backs at start, the same for both sides: a few calls' working sets and 64 MB, at most
        1 GB. No more: on a VM, huge pages beyond the host's warm memory fault in slowly (a 256 MB floor cost
        1.4-3.6 s per worker start in 4 of 6 starts here, 64 MB took 7 ms; 2026-12-03)."""
        footprint = sized(self.problem)
        per_call = footprint.inputs + footprint.outputs if footprint is not None else 0
        return min(4 * per_call + (64 << 20), 1 << 30)
