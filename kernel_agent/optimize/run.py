"""Many kernels in one run: kernel lists and manifests, parallel progress, resume.

A run's whole plan (kernels with their options, provider settings, budgets) is
stored with the run before any work starts, so `--resume RUN` needs nothing
but the run id.
"""

from __future__ import annotations

import glob
import logging
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from kernel_agent.db import writes as store
from kernel_agent.db.session import Database
from kernel_agent.evaluate.pipeline import EvalOptions
from kernel_agent.optimize.budget import Budget
from kernel_agent.optimize.config import KernelSpec, RunPlan, manifest_keys, minimum_of
from kernel_agent.optimize.executors.local import Executor
from kernel_agent.optimize.kernel_loop import KernelLoop, KernelResult, LoopOptions, Progress, Shared
from kernel_agent.problem.load import Problem, ProblemError, load_problem
from kernel_agent.propose.base import Provider

MAX_KERNEL_THREADS = 16
LOG = logging.getLogger(__name__)


class PlanError(ValueError):
    """A kernel list or manifest that cannot be used (one line naming the fix)."""


def loop_options(plan: RunPlan, spec: KernelSpec) -> LoopOptions:
    """One kernel's options: the run's, with what its manifest entry sets for it alone."""
    return LoopOptions(
        search=spec.search(plan.search),
        eval=EvalOptions.from_config(spec.evaluation(plan.evaluation)),
        budget=spec.budget(),
        references=plan.references,
    )


def device_of(plan: RunPlan, spec: KernelSpec) -> str:
    """The device a kernel's run names for it (auto, cpu or cuda), as stored in run_kernels.device."""
    return str(spec.evaluation(plan.evaluation).device)


def labels(plan: RunPlan, problems: list[tuple[KernelSpec, Problem]]) -> list[str]:
    """What the progress display and the providers call each kernel: its name, with its device in a run that
    evaluates kernels on more than one device (`cpp_softmax (cuda)`)."""
    devices = [device_of(plan, spec) for spec, _ in problems]
    several = len(set(devices)) > 1
    return [f"{p.name} ({d})" if several else p.name for (_, p), d in zip(problems, devices)]


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
                members = sorted(
                    (p for p in path.iterdir() if p.is_dir() and (p / "problem.py").is_file()), key=natural_order
                )
                if not members:  # a KernelBench level: one file per problem
                    members = sorted((p for p in path.glob("*.py") if not p.name.startswith("_")), key=natural_order)
                if not members:
                    raise PlanError(
                        f"{path}: holds no problems (folders with problem.py and kernel.py, or KernelBench .py files)"
                    )
                found += [str(m) for m in members]
            else:
                found.append(str(path))
    unique: list[str] = []
    for path in found:
        if str(Path(path).resolve()) not in {str(Path(u).resolve()) for u in unique}:
            unique.append(path)
    return unique


def natural_order(path: Path) -> tuple:
    """'2_x' before '10_x', as KernelBench numbers its files."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name))


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
        values = manifest_values(merged, f"{path}: kernel #{index}")
        kernel_path = Path(merged["path"])
        if not kernel_path.is_absolute():
            kernel_path = path.parent / kernel_path
        specs += [KernelSpec(**{**values, "path": expanded}) for expanded in expand_paths([str(kernel_path)])]
    return specs


def manifest_values(entry: dict[str, Any], where: str) -> dict[str, Any]:
    """A manifest entry's keys (the options' user-facing names) as KernelSpec fields, each checked like its flag."""
    keys = manifest_keys()
    unknown = set(entry) - set(keys)
    if unknown:
        raise PlanError(f"{where} has unknown option(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(keys))}")
    values = {}
    for key, value in entry.items():
        low = minimum_of(keys[key])
        if low is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < low):
            raise PlanError(f"{where}: {key} must be a number of at least {low:g}, not {value!r}")
        values[keys[key]] = value
    return values


def load_kernel(spec: KernelSpec) -> Problem:
    problem = load_problem(spec.path)
    if spec.tolerances:
        for dtype, pair in spec.tolerances.items():
            if dtype not in problem.tolerances or not (isinstance(pair, list) and len(pair) == 2):
                raise ProblemError(
                    f"{spec.path}: manifest tolerances for {dtype!r} "
                    "must be [rtol, atol] for one of the problem's dtypes"
                )
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
    log: str = "the log"  # where a failed kernel's traceback goes (the CLI names its file)

    def run(self) -> list[KernelResult]:
        run_budget = Budget(self.plan.budget, "run")
        shared = Shared(
            executor=self.executor,
            llm_slots=threading.BoundedSemaphore(max(1, self.plan.concurrency)),
            budget=run_budget,
            stop=self.stop,
            ceilings=self.ceilings,
        )
        loops = [
            KernelLoop(
                self.db,
                self.run_id,
                problem,
                self.providers[label],
                loop_options(self.plan, spec),
                self.progress,
                shared,
                label,
            )
            for (spec, problem), label in zip(self.problems, labels(self.plan, self.problems))
        ]
        threads = max(1, min(len(loops), MAX_KERNEL_THREADS))
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kernel") as pool:
            futures = [pool.submit(self._guarded, loop) for loop in loops]
            return [f.result() for f in futures]

    def _guarded(self, loop: KernelLoop) -> KernelResult:
        """One kernel's loop; whatever it raises ends that kernel alone (`error`), never the run."""
        try:
            return loop.run()
        except Exception as exc:  # noqa: BLE001 - a harness or provider bug, an I/O error: one kernel's verdict
            LOG.exception("%s: the kernel's loop failed", loop.label)
            return loop.failed(exc, self.log)


def store_plan(db: Database, plan: RunPlan) -> int:
    model = plan.provider_options.model if plan.provider == "openai" else None
    return store.create_run(db, plan.provider, model, plan.to_json())
