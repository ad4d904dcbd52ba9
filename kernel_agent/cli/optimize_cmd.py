"""`kernel-agent optimize KERNEL...`: find faster verified variants and store everything.

Thin: parse options into a `RunPlan`, store it with a new run (or load it with
`--resume`), build the provider and executor, run the batch, render.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import MS_CAPTION, fail, stderr, stdout, warn
from kernel_agent.cli.options import GIVEN, fields_of, from_config
from kernel_agent.cli.references import check_compile_modes
from kernel_agent.cli.speedups import (
    REFERENCE_CAPTION,
    REFERENCE_COLUMNS,
    losing_to_torch,
    print_metrics,
    reference_cells,
)
from kernel_agent.core.config import ExecutorKind
from kernel_agent.optimize.config import KernelSpec, RunPlan, per_device

# Evaluation options `optimize` does not offer (yet): a run evaluates with their defaults, a manifest sets backend per
# kernel. `device` is offered as the run's `--device` list instead (RunPlan.devices: one kernel entry per device).
NOT_OFFERED = ("backend", "timing_rounds", "isolation", "keep_workdir", "device")


@from_config
def optimize_command(
    kernels: list[str] = typer.Argument(
        None, help="Problem folders, KernelBench .py files, folders of problems, or globs."
    ),
    manifest: Path = typer.Option(None, help="TOML manifest: [[kernel]] tables with path and per-kernel options."),
    resume: int = typer.Option(None, help="Continue run RUN where it stopped (its stored plan is used)."),
    retry: str = typer.Option(
        None,
        help="With --resume: run again the kernels that ended too_large or baseline_failed (a comma-separated list "
        "of those statuses), e.g. after --memory-budget was raised; their earlier rows stay stored.",
    ),
    plan: RunPlan = fields_of(skip=NOT_OFFERED),
    db: str = opt.DB,
    json_output: bool = opt.JSON,
    given: frozenset[str] = GIVEN,
) -> None:
    """Optimize kernels: baseline, then rounds of propose -> verify -> time -> keep the best."""
    from kernel_agent.optimize.run import PlanError, expand_paths, load_manifest

    if "ray_address" in given and "executor" in given and plan.executor != ExecutorKind.RAY:
        fail("--ray-address needs --executor ray")
    retried = retry_statuses(retry)
    if retried and resume is None:
        fail("--retry needs --resume RUN (the run whose kernels to run again)")
    database = opt.open_db(db)
    if resume is not None:
        run_resume(
            database,
            resume,
            json_output,
            plan.workers,
            plan.executor if "executor" in given else None,
            plan.ray_address,
            retried,
            plan.evaluation.memory_budget if "memory_budget" in given else None,
        )
        return
    if plan.ray_address is not None:
        plan.executor = ExecutorKind.RAY
    if not kernels and manifest is None:
        fail("name the kernels to optimize (problem folders, KernelBench files, globs) or pass --manifest FILE.toml")
    try:
        plan.kernels = [KernelSpec(path=p) for p in expand_paths(kernels or [])]
        if manifest is not None:
            plan.kernels += load_manifest(manifest)
    except PlanError as exc:
        fail(str(exc))
    plan.kernels = per_device(plan.kernels, plan.devices)
    if plan.provider == "replay" and plan.provider_options.replay_run is None:
        fail("--provider replay needs --replay-run RUN (the run whose recorded replies to replay)")
    check_compile_modes(plan.references.compile_modes)
    execute(database, plan, None, json_output)


RETRYABLE = ("too_large", "baseline_failed")  # statuses that end a kernel before its search: nothing is redone


def retry_statuses(text: str | None) -> frozenset[str]:
    statuses = frozenset(s.strip() for s in (text or "").split(",") if s.strip())
    unknown = sorted(statuses - set(RETRYABLE))
    if unknown:
        fail(f"--retry takes {' or '.join(RETRYABLE)} (comma-separated), not {', '.join(unknown)}")
    return statuses


def run_resume(
    database,
    run_id: int,
    json_output: bool,
    workers: int | None = None,
    executor: ExecutorKind | None = None,
    ray_address: str | None = None,
    retry: frozenset[str] = frozenset(),
    memory_budget: float | None = None,
) -> None:
    """Continue a stored run with its stored plan (--workers, --executor and --ray-address may change where it runs,
    --memory-budget what it may use; --retry runs kernels that ended before their search again)."""
    from kernel_agent.db import writes as store
    from kernel_agent.db.models import RunRow

    if retry:
        retried = store.retry_kernels(database, run_id, retry)
        stderr.print(f"run {run_id}: {retried} kernel(s) that ended {' or '.join(sorted(retry))} will run again")
    with database.session() as session:
        run = session.get(RunRow, run_id)
        if run is None:
            fail(f"no run {run_id} in this database; `kernel-agent runs list` shows the runs")
        if run.status == "completed":
            fail(f"run {run_id} already completed; nothing to resume")
        stored = dict(run.options or {})
    if "kernels" not in stored or "provider" not in stored:
        fail(f"run {run_id} was stored without a plan; it cannot be resumed")
    plan = RunPlan.from_json(stored)
    if workers:
        plan.workers = workers
    if executor:
        plan.executor = executor
        plan.ray_address = ray_address if executor == ExecutorKind.RAY else None
    elif ray_address:
        plan.executor, plan.ray_address = ExecutorKind.RAY, ray_address
    if memory_budget is not None:
        plan.evaluation.memory_budget = memory_budget
    execute(database, plan, run_id, json_output)


def build_providers(database, plan: RunPlan, problems, labels: list[str] | None = None) -> dict:
    """One provider per kernel label (its name, with its device in a multi-device run; replay is per kernel, the
    search per kernel and device; the others are shared)."""
    from kernel_agent.db import writes as store
    from kernel_agent.optimize.kernel_loop import missing_device
    from kernel_agent.optimize.run import device_of
    from kernel_agent.propose import make_provider
    from kernel_agent.propose.openai_chat import load_prices
    from kernel_agent.propose.search import SearchProvider

    labels = labels or [p.name for _, p in problems]
    options = plan.provider_options
    if plan.provider == "replay":
        return {
            label: make_provider("replay", calls=store.recorded_calls(database, options.replay_run, p.name))
            for (_, p), label in zip(problems, labels)
        }
    if plan.provider == "openai":
        shared = make_provider(
            "openai",
            base_url=options.base_url,
            model=options.model,
            temperature=options.temperature,
            max_tokens=options.tokens_per_reply,
            request_timeout=options.request_timeout,
            max_retries=options.max_retries,
            prompts_dir=options.prompts_dir,
            prices=load_prices(options.prices_file) if options.prices_file else None,
            api_key_file=options.api_key_file,
            n=plan.search.samples,
        )
    elif plan.provider == "search":
        return {  # a kernel whose device is not here runs nothing: no advice to read for it
            label: SearchProvider()
            if missing_device(p, device_of(plan, spec))
            else advised_search(database, plan, spec, p)
            for (spec, p), label in zip(problems, labels)
        }
    else:  # plugins: they take no options from the command line
        shared = make_provider(plan.provider)
    return {label: shared for label in labels}


def advised_search(database, plan: RunPlan, spec: KernelSpec, problem):  # noqa: ANN001 - Problem, imported late
    """The search provider for one kernel, with its selector's configs first when the problem was tuned here."""
    from kernel_agent.evaluate.pipeline import run_device
    from kernel_agent.propose.search import SearchProvider
    from kernel_agent.select.advice import advise

    evaluation = spec.evaluation(plan.evaluation)
    threads = evaluation.threads or os.cpu_count() or 1
    advice = advise(database, problem, run_device(problem, evaluation.device), threads, plan.search.selector)
    trusted = plan.search.trust_selector and bool(advice.configs)
    if advice.note:
        note = f"{advice.note}; --trust-selector: only those, no climb" if trusted else advice.note
        stderr.print(f"{problem.name}: {note}", markup=False, highlight=False, soft_wrap=True)
    if trusted:
        return SearchProvider(first=advice.decision, only_first=True)
    return SearchProvider(first=advice.configs)


def execute(database, plan: RunPlan, run_id: int | None, json_output: bool) -> None:
    """Load the kernels, store the plan (or reopen the run), run the batch, render its results."""
    from kernel_agent.cli.progress import LoopProgress
    from kernel_agent.db import writes as store
    from kernel_agent.evaluate.pipeline import EvalOptions, run_device
    from kernel_agent.optimize.kernel_loop import missing_device
    from kernel_agent.optimize.run import BatchRun, device_ceilings, device_of, labels, load_kernel, store_plan
    from kernel_agent.optimize.search_state import KernelStatus
    from kernel_agent.problem.canaries import audit_problem
    from kernel_agent.problem.load import ProblemError
    from kernel_agent.propose.openai_chat import ProviderConfigError

    problems = []
    available = []  # (problem, the device it runs on) of each kernel whose device is here
    for spec in plan.kernels:
        try:
            problem = load_kernel(spec)
            named = device_of(plan, spec)
            if not missing_device(problem, named):  # else: the kernel's loop ends with the reason
                available.append((problem, run_device(problem, named)))
                for warning in audit_problem(problem, available[-1][1]):
                    warn(warning)
        except ProblemError as exc:
            fail(str(exc))
        problems.append((spec, problem))
    keys = [(p.name, device_of(plan, spec)) for spec, p in problems]
    if len(set(keys)) != len(keys):
        fail(
            "two kernels share a name "
            f"({', '.join(sorted({key[0] for key in keys if keys.count(key) > 1}))}); pass each problem once"
        )
    shown = labels(plan, problems)
    try:
        providers = build_providers(database, plan, problems, shown)
    except (ProviderConfigError, ValueError) as exc:
        fail(str(exc))
    if run_id is None:
        run_id = store_plan(database, plan)
        stderr.print(
            f"run {run_id}: {len(problems)} kernel(s), provider {plan.provider}, database {database.display_url}",
            highlight=False,
        )
    else:
        store.reopen_run(database, run_id)
        stderr.print(
            f"resuming run {run_id}: {len(problems)} kernel(s), "
            f"provider {plan.provider}, database {database.display_url}",
            highlight=False,
        )
    executor = build_executor(plan)
    progress = LoopProgress(stderr, shown, plan.search.proposal_rounds)
    timed_devices = {device for p, device in available if not (p.device == "cuda" and device == "cpu")}
    ceilings = device_ceilings(
        database, timed_devices, EvalOptions.from_config(plan.evaluation).threads, remeasure=False
    )
    batch = BatchRun(database, run_id, plan, problems, providers, executor, progress.event, ceilings=ceilings)
    results = run_until_interrupted(batch, progress, database, run_id)
    executor.shutdown()
    if results and all(r.status == KernelStatus.PROVIDER_FAILED for r in results):
        store.finish_run(database, run_id, "failed", results[-1].reason)
        fail(f"{results[-1].reason}; check --base-url, the key and the endpoint, then rerun")
    unfinished = [r for r in results if r.status in (KernelStatus.INTERRUPTED, KernelStatus.BUDGET_REACHED)]
    store.finish_run(
        database, run_id, "stopped" if unfinished else "completed", "; ".join(sorted({r.reason for r in unfinished}))
    )
    from kernel_agent.db.reads import run_detail

    detail = run_detail(database, run_id)
    metrics = detail["metrics"] if detail is not None else None
    if json_output:
        document = {"run_id": run_id, "kernels": [r.to_dict() for r in results], "metrics": metrics}
        sys.stdout.write(json.dumps(document) + "\n")
    else:
        render_summary(run_id, results, metrics)


def build_executor(plan: RunPlan):
    """The plan's executor: this machine's pool, or Ray (a local instance, or the cluster at plan.ray_address)."""
    if plan.executor == ExecutorKind.RAY:
        from kernel_agent.optimize.executors.ray import RayExecutor, RayUnavailable

        try:
            executor = RayExecutor(plan.ray_address, plan.workers)
        except RayUnavailable as exc:
            fail(str(exc))
        where = plan.ray_address or "a local Ray instance"
        stderr.print(
            f"executor: Ray at {where} ({executor.gpus} GPU(s), {executor.cpu_slots} CPU timing slot(s))",
            highlight=False,
        )
        return executor
    from kernel_agent.optimize.executors.local import LocalExecutor

    return LocalExecutor(plan.workers)


def run_until_interrupted(batch, progress, database, run_id: int) -> list:
    """Run the batch; the first Ctrl-C lets evaluations in flight finish, a second one stops at once."""
    from kernel_agent.db import writes as store

    outcome: dict = {}

    def target() -> None:
        try:
            outcome["results"] = batch.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="batch", daemon=True)
    with progress:
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.2)
        except KeyboardInterrupt:
            batch.stop.set()
            store.finish_run(database, run_id, "interrupted", "stopped by Ctrl-C")
            progress.stop()
            stderr.print(
                "stopping: letting evaluations in flight finish (Ctrl-C again to "
                f"stop now). Resume with: kernel-agent optimize --resume {run_id}",
                highlight=False,
            )
            try:
                while worker.is_alive():
                    worker.join(0.2)
            except KeyboardInterrupt:
                pass
            stderr.print(
                f"interrupted: run {run_id} is saved; resume with: kernel-agent optimize --resume {run_id}",
                highlight=False,
            )
            sys.stderr.flush()
            # Sandboxed workers die with this process; an evaluation cut short is redone on resume.
            os._exit(130)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["results"]


STATUS_LABELS = {
    "improved": "improved",
    "needs_review": "needs review",
    "no_gain": "no gain",
    "needs_gpu": "verified; needs a GPU",
    "baseline_failed": "baseline failed",
    "too_large": "too large",
    "provider_failed": "provider failed",
    "no_device": "no device",
    "budget_reached": "budget reached",
    "interrupted": "interrupted",
}


# What must stay whole in an 80-column table: the status word ("improved").
MIN_WIDTHS = {"status": 8}


def render_summary(run_id: int, results: list, metrics: dict | None = None) -> None:
    """The final table on stdout; reasons follow it, one line per kernel that has one (a flagged candidate
    waiting for review always has one, with the command that approves it). A run on several devices shows each
    kernel's device."""
    from rich.table import Table

    table = Table(title=f"run {run_id}", caption=f"{MS_CAPTION}; {REFERENCE_CAPTION}")
    several = len({r.device for r in results}) > 1
    vs = [{kind: relative.to_json() for kind, relative in r.speedup_vs().items()} for r in results]
    columns = ("kernel", *(("device",) if several else ()), "baseline ms", "best ms", "speedup", *REFERENCE_COLUMNS)
    for column in (*columns, "best candidate", "status"):
        table.add_column(
            column,
            justify="right" if column not in ("kernel", "device", "status") else "left",
            no_wrap=column == "kernel",
            min_width=MIN_WIDTHS.get(column),
        )
    for r, versus in zip(results, vs):
        table.add_row(
            r.name,
            *((r.device,) if several else ()),
            f"{r.baseline_ms:.3f}" if r.baseline_ms else "-",
            f"{r.best_ms:.3f}" if r.best_ms else "-",
            f"{r.speedup:.2f}x" if r.speedup else "-",
            *reference_cells(versus),
            str(r.best_candidate or "-"),
            STATUS_LABELS.get(r.status, r.status),
        )
    stdout.print(table)
    if metrics is not None:
        print_metrics(stdout, metrics)
    for r, versus in zip(results, vs):
        name = f"{r.name} ({r.device})" if several else r.name
        if r.reason:  # soft_wrap: a `kernel-agent review approve ...` command stays on one line to copy
            stdout.print(f"{name}: {r.reason}", highlight=False, soft_wrap=True)
        lost = losing_to_torch(name, versus)
        if lost:
            stdout.print(lost, highlight=False, soft_wrap=True)
        for kind, point in sorted(r.references.items()):
            if point.get("speedup") is None:
                stdout.print(f"{name}: no torch {kind} point: {point.get('reason')}", highlight=False, soft_wrap=True)
    stdout.print(f"details: kernel-agent runs show {run_id}; code: kernel-agent candidates diff ID", highlight=False)
