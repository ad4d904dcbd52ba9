"""Many kernels in one run: kernel lists and manifests, parallel progress, resume.

A run's whole plan (kernels with their options, provider settings, budgets) is
stored with the run before any work starts, so `--resume RUN` needs nothing
but the run id.
"""

from __future__ import annotations

import glob
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from kernel_agent.db import writes as store
from kernel_agent.db.session import Database
from kernel_agent.evaluate.pipeline import EvalOptions
from kernel_agent.measure.stats import SANITY_SPEEDUP
from kernel_agent.optimize.budget import Budget, BudgetLimits
from kernel_agent.optimize.executors.local import Executor
from kernel_agent.optimize.kernel_loop import KernelLoop, KernelResult, LoopOptions, Progress, Shared
from kernel_agent.problem.load import Problem, ProblemError, load_problem
from kernel_agent.propose.base import Provider

KERNEL_KEYS = {"path", "rounds", "samples", "beam", "patience", "tolerances", "backend", "max_candidates", "max_tokens", "max_cost", "time_limit"}
MAX_KERNEL_THREADS = 16


class PlanError(ValueError):
    """A kernel list or manifest that cannot be used (one line naming the fix)."""


@dataclass
class KernelSpec:
    path: str
    rounds: int | None = None
    samples: int | None = None
    beam: int | None = None
    patience: int | None = None
    tolerances: dict[str, list[float]] | None = None
    backend: str | None = None
    max_candidates: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    time_limit: float | None = None


@dataclass
class RunPlan:
    """Everything needed to run (or resume) a batch, stored as JSON with the run."""

    kernels: list[KernelSpec]
    provider: str
    provider_options: dict[str, Any] = field(default_factory=dict)
    rounds: int = 3
    samples: int = 4
    beam: int = 2
    patience: int = 2
    roofline_stop: float = 0.9
    device: str = "auto"
    timeout: float = 180.0
    min_gain: float = 0.02
    sanity_speedup: float = SANITY_SPEEDUP  # above it a speedup is flagged for human review, never accepted
    threads: int | None = None
    sandbox: str = "sandbox"
    workers: int | None = None
    concurrency: int = 4
    budget: dict[str, Any] = field(default_factory=dict)  # run-wide BudgetLimits fields
    executor: str = "local"  # "local" (this machine's pool) or "ray" (a Ray cluster); plans stored before these keys load as local
    ray_address: str | None = None  # None: start a local Ray instance

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunPlan:
        data = dict(data)
        data["kernels"] = [KernelSpec(**k) for k in data.get("kernels", [])]
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def eval_options(self) -> EvalOptions:
        options = EvalOptions(device=self.device, timeout=self.timeout, min_gain=self.min_gain, sanity_speedup=self.sanity_speedup,
                              sandbox_root=Path(self.sandbox))
        if self.threads:
            options.threads = self.threads
        return options

    def loop_options(self, spec: KernelSpec) -> LoopOptions:
        eval_options = self.eval_options()
        if spec.backend:
            eval_options = replace(eval_options, backend=spec.backend)
        return LoopOptions(
            rounds=spec.rounds or self.rounds, samples=spec.samples or self.samples, beam=spec.beam or self.beam,
            patience=spec.patience or self.patience, roofline_stop=self.roofline_stop, eval=eval_options,
            budget=BudgetLimits(spec.max_candidates, spec.max_tokens, spec.max_cost, spec.time_limit),
        )


def expand_paths(arguments: list[str]) -> list[str]:
    """Paths, globs, and folders of problem folders, in a stable order without repeats."""
    found: list[str] = []
    for argument in arguments:
        matches = sorted(glob.glob(argument)) if any(ch in argument for ch in "*?[") else [argument]
        if not matches:
            raise PlanError(f"{argument}: the pattern matches nothing")
        for match in matches:
            path = Path(match)
            if path.is_dir() and not (path / "problem.py").is_file():
                members = sorted(p for p in path.iterdir() if p.is_dir() and (p / "problem.py").is_file())
                if not members:
                    raise PlanError(f"{path}: holds no problem folders (folders with problem.py and kernel.py)")
                found += [str(m) for m in members]
            else:
                found.append(str(path))
    unique: list[str] = []
    for path in found:
        if str(Path(path).resolve()) not in {str(Path(u).resolve()) for u in unique}:
            unique.append(path)
    return unique


def load_manifest(path: Path) -> list[KernelSpec]:
    """A TOML manifest: `[[kernel]]` tables with `path` and per-kernel options; paths relative to the manifest."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PlanError(f"{path}: cannot read the manifest: {exc}") from None
    entries = data.get("kernel")
    if not isinstance(entries, list) or not entries:
        raise PlanError(f"{path}: a manifest needs at least one [[kernel]] table with a path")
    defaults = data.get("defaults", {})
    specs = []
    for index, entry in enumerate(entries, 1):
        merged = {**defaults, **entry} if isinstance(entry, dict) else None
        if merged is None or "path" not in merged:
            raise PlanError(f"{path}: kernel #{index} has no path")
        unknown = set(merged) - KERNEL_KEYS
        if unknown:
            raise PlanError(f"{path}: kernel #{index} has unknown option(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(KERNEL_KEYS))}")
        kernel_path = Path(merged["path"])
        if not kernel_path.is_absolute():
            kernel_path = path.parent / kernel_path
        for expanded in expand_paths([str(kernel_path)]):
            try:
                specs.append(KernelSpec(**{**merged, "path": expanded}))
            except TypeError as exc:
                raise PlanError(f"{path}: kernel #{index}: {exc}") from None
    return specs


def load_kernel(spec: KernelSpec) -> Problem:
    problem = load_problem(spec.path)
    if spec.tolerances:
        for dtype, pair in spec.tolerances.items():
            if dtype not in problem.tolerances or not (isinstance(pair, list) and len(pair) == 2):
                raise ProblemError(f"{spec.path}: manifest tolerances for {dtype!r} must be [rtol, atol] for one of the problem's dtypes")
            problem.tolerances[dtype] = (float(pair[0]), float(pair[1]))
    return problem


@dataclass
class BatchRun:
    db: Database
    run_id: int
    plan: RunPlan
    problems: list[tuple[KernelSpec, Problem]]
    providers: dict[str, Provider]
    executor: Executor
    progress: Progress
    stop: threading.Event = field(default_factory=threading.Event)
    ceilings: dict[str, Any] = field(default_factory=dict)

    def run(self) -> list[KernelResult]:
        run_budget = Budget(BudgetLimits(**self.plan.budget), "run")
        shared = Shared(executor=self.executor, llm_slots=threading.BoundedSemaphore(max(1, self.plan.concurrency)), budget=run_budget, stop=self.stop,
                        ceilings=self.ceilings)
        loops = [
            KernelLoop(self.db, self.run_id, problem, self.providers[problem.name], self.plan.loop_options(spec), self.progress, shared)
            for spec, problem in self.problems
        ]
        threads = max(1, min(len(loops), MAX_KERNEL_THREADS))
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kernel") as pool:
            futures = [pool.submit(loop.run) for loop in loops]
            return [f.result() for f in futures]


def store_plan(db: Database, plan: RunPlan, model: str | None) -> int:
    return store.create_run(db, plan.provider, model, plan.to_json())


def device_ceilings(db: Database, devices: set[str], threads: int | None, remeasure: bool = False) -> dict[str, Any]:
    """Ceilings per device: from the database when this device fingerprint was measured before,
    else (or when `remeasure`) measured now, a few seconds before any evaluation starts, and stored."""
    from kernel_agent.measure.profile import ceilings_from_dict, ceilings_to_dict, fingerprint_key, measure_ceilings

    found: dict[str, Any] = {}
    for device in sorted(devices):
        key = fingerprint_key(device, threads)
        data = None if remeasure else store.stored_ceilings(db, key)
        if data is None:
            ceilings = measure_ceilings(device, threads=threads)
            store.store_ceilings(db, key, ceilings_to_dict(ceilings), replace=remeasure)
            data = store.stored_ceilings(db, key)
        found[device] = ceilings_from_dict(data)
    return found
