"""A whole `optimize` run from its plan to its outcome: load the kernels, build their providers, store the plan
(or reopen the run), measure the device ceilings, run the batch and set the run's final status.

The caller parses and renders: it passes where one-line notes go, the progress callback and how the batch is
driven (the CLI's lets a first Ctrl-C finish what is in flight), and gets a `RunOutcome` back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernel_agent.db import writes as store
from kernel_agent.db.reads import run_detail
from kernel_agent.db.session import Database
from kernel_agent.evaluate.canaries import audit_problem
from kernel_agent.evaluate.pipeline import EvalOptions, run_device
from kernel_agent.memo.ceilings import device_ceilings
from kernel_agent.optimize.config import KernelSpec, RunPlan
from kernel_agent.optimize.executors.local import Executor
from kernel_agent.optimize.kernel_loop import KernelResult, Progress, missing_device
from kernel_agent.optimize.providers import Note, build_providers
from kernel_agent.optimize.run import BatchRun, device_of, labels, load_kernel, store_plan
from kernel_agent.optimize.search_state import KernelStatus, RunStatus
from kernel_agent.problem.load import Problem, ProblemError

RESUMABLE = (KernelStatus.INTERRUPTED, KernelStatus.BUDGET_REACHED, KernelStatus.ERROR)


class RunError(Exception):
    """The run cannot start or ended without searching anything (one line naming the fix)."""


@dataclass
class RunOutcome:
    run_id: int
    status: RunStatus
    results: list[KernelResult]
    metrics: dict[str, Any] | None = None
    note: str = ""  # why the run stopped, when it did


@dataclass
class RunHooks:
    """What the caller owns: where notes and warnings go, the progress callback, the executor and how the batch
    is driven (`drive(batch)` returns its results; plain `batch.run()` by default)."""

    executor: Callable[[], Executor]
    note: Note = lambda _: None
    warn: Note = lambda _: None
    progress: Callable[[list[str]], Progress] | None = None
    drive: Callable[[BatchRun, int], list[KernelResult]] = lambda batch, _: batch.run()
    error_log: str = ""
    learned_rules: Callable[[int], dict | None] = lambda _: None


def optimize(database: Database, plan: RunPlan, run_id: int | None, hooks: RunHooks) -> RunOutcome:
    """Run (or resume, with `run_id`) the plan's kernels; raises RunError before anything is stored when a
    kernel cannot be loaded, two share a name or the provider cannot be built."""
    problems, available = _load(plan, hooks.warn)
    shown = labels(plan, problems)
    learned = hooks.learned_rules(run_id) if run_id is not None and plan.provider == "openai" else None
    from kernel_agent.propose.openai_chat import ProviderConfigError

    try:
        providers = build_providers(database, plan, problems, shown, learned, hooks.note, hooks.warn)
    except (ProviderConfigError, ValueError) as exc:
        raise RunError(str(exc)) from None
    what = f"{len(problems)} kernel(s), provider {plan.provider}, database {database.display_url}"
    if run_id is None:
        run_id = store_plan(database, plan)
        hooks.note(f"run {run_id}: {what}")
    else:
        store.reopen_run(database, run_id)
        hooks.note(f"resuming run {run_id}: {what}")
    executor = hooks.executor()
    timed_devices = {device for p, device in available if not (p.device == "cuda" and device == "cpu")}
    threads = EvalOptions.from_config(plan.evaluation).threads
    ceilings = device_ceilings(database, timed_devices, threads, remeasure=False)
    progress = hooks.progress(shown) if hooks.progress is not None else (lambda kind, data: None)
    batch = BatchRun(
        database, run_id, plan, problems, providers, executor, progress, ceilings=ceilings, log=hooks.error_log
    )
    try:
        results = hooks.drive(batch, run_id)
    finally:
        executor.shutdown()
    return _finish(database, run_id, results)


def _load(plan: RunPlan, warn: Note) -> tuple[list[tuple[KernelSpec, Problem]], list[tuple[Problem, str]]]:
    """Every kernel's problem, and (problem, the device it runs on) of those whose device is here."""
    problems, available = [], []
    for spec in plan.kernels:
        try:
            problem = load_kernel(spec)
            named = device_of(plan, spec)
            if not missing_device(problem, named):  # else: the kernel's loop ends with the reason
                available.append((problem, run_device(problem, named)))
                for warning in audit_problem(problem, available[-1][1]):
                    warn(warning)
        except ProblemError as exc:
            raise RunError(str(exc)) from None
        problems.append((spec, problem))
    keys = [(p.name, device_of(plan, spec)) for spec, p in problems]
    if len(set(keys)) != len(keys):
        shared = ", ".join(sorted({key[0] for key in keys if keys.count(key) > 1}))
        raise RunError(f"two kernels share a name ({shared}); pass each problem once")
    return problems, available


def _finish(database: Database, run_id: int, results: list[KernelResult]) -> RunOutcome:
    """The run's final status: failed when every provider failed, stopped when a kernel can be resumed."""
    if results and all(r.status == KernelStatus.PROVIDER_FAILED for r in results):
        store.finish_run(database, run_id, RunStatus.FAILED, results[-1].reason)
        return RunOutcome(run_id, RunStatus.FAILED, results, note=results[-1].reason)
    unfinished = [r for r in results if r.status in RESUMABLE]
    note = "; ".join(sorted({r.reason for r in unfinished}))
    status = RunStatus.STOPPED if unfinished else RunStatus.COMPLETED
    store.finish_run(database, run_id, status, note)
    detail = run_detail(database, run_id)
    return RunOutcome(run_id, status, results, detail["metrics"] if detail is not None else None, note)
