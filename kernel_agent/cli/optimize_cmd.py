"""`kernel-agent optimize KERNEL...`: find faster verified variants and store everything.

Parse options into a `RunPlan` (or load a stored one with `--resume`), hand it to
`optimize.start.optimize` with this terminal's progress, Ctrl-C handling and notes, render its outcome.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import MS_CAPTION, fail, stderr, stdout, warn
from kernel_agent.cli.doctor_cmd import print_fallback
from kernel_agent.cli.options import GIVEN, fields_of, from_config
from kernel_agent.cli.references import check_compile_modes
from kernel_agent.cli.speedups import (
    REFERENCE_CAPTION,
    REFERENCE_COLUMNS,
    losing_to_torch,
    print_metrics,
    reference_cells,
)
from kernel_agent.core import json_out
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
    wide: bool = typer.Option(
        False, "--wide", help="Every column of the end table (a narrow terminal drops the least needed ones)."
    ),
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
        if kernels or manifest is not None:
            fail(f"--resume {resume} continues the run's own kernels; name none (start a new run for others)")
        run_resume(database, resume, json_output, plan, given, retried, wide=wide)
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
    execute(database, plan, None, json_output, wide)


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
    typed: RunPlan | None = None,
    given: frozenset[str] = frozenset(),
    retry: frozenset[str] = frozenset(),
    wide: bool = False,
) -> None:
    """Continue a stored run with its stored plan; an option typed again replaces the stored value, said in one line
    and stored (optimize/replan.py). --retry runs kernels that ended before their search again."""
    from kernel_agent.db import writes as store
    from kernel_agent.db.models import RunRow
    from kernel_agent.optimize.replan import ReplanError, replan, summary

    with database.session() as session:
        run = session.get(RunRow, run_id)
        if run is None:
            fail(f"no run {run_id} in this database; `kernel-agent runs list` shows the runs")
        completed, stored = run.status == "completed", dict(run.options or {})
    if completed and not retry:
        fail(f"run {run_id} already completed; nothing to resume")
    if "kernels" not in stored or "provider" not in stored:
        fail(f"run {run_id} was stored without a plan; it cannot be resumed")
    try:
        plan, changes = replan(RunPlan.from_json(stored), typed or RunPlan(), given)
    except ReplanError as exc:
        fail(str(exc))
    if retry:
        retried = store.retry_kernels(database, run_id, retry)
        stderr.print(f"run {run_id}: {retried} kernel(s) that ended {' or '.join(sorted(retry))} will run again")
        if completed and not retried:
            fail(f"run {run_id} already completed; nothing to resume")
    if changes:
        stderr.print(summary(run_id, changes), highlight=False, markup=False, soft_wrap=True)
        store.replace_plan(database, run_id, plan.to_json())
    execute(database, plan, run_id, json_output, wide)


def execute(database, plan: RunPlan, run_id: int | None, json_output: bool, wide: bool = False) -> None:
    """Run the plan through optimize/start.py with this terminal's progress, Ctrl-C handling and notes; render."""
    from kernel_agent.cli.progress import LoopProgress
    from kernel_agent.db import writes as store
    from kernel_agent.optimize.search_state import RunStatus
    from kernel_agent.optimize.start import RunError, RunHooks, optimize

    shown: dict[str, LoopProgress] = {}

    def progress(labels: list[str]):  # noqa: ANN202 - the loop's Progress callback
        shown["progress"] = LoopProgress(stderr, labels, plan.search.proposal_rounds)
        return shown["progress"].event

    def executor():  # noqa: ANN202 - an Executor, imported late
        if plan.executor == ExecutorKind.LOCAL:  # Ray workers probe their own nodes
            print_fallback(plan.evaluation.isolation)
        return build_executor(plan)

    options = plan.provider_options
    hooks = RunHooks(
        executor=executor,
        note=lambda text: stderr.print(text, markup=False, highlight=False, soft_wrap=True),
        warn=warn,
        progress=progress,
        drive=lambda batch, run: run_until_interrupted(batch, shown["progress"], database, run),
        error_log=error_log(),
        learned_rules=lambda run: store.endpoint_rules(database, run, options.base_url, options.model),
    )
    try:
        outcome = optimize(database, plan, run_id, hooks)
    except RunError as exc:
        fail(str(exc))
    if outcome.status == RunStatus.FAILED:
        hint = "" if "--no-stream" in outcome.note else "; check --base-url, the key and the endpoint, then rerun"
        fail(f"{outcome.note}{hint}")  # an endpoint that never streamed names its own fix
    if json_output:
        kernels = [r.to_dict() for r in outcome.results]
        document = {"run_id": outcome.run_id, "kernels": kernels, "metrics": outcome.metrics}
        sys.stdout.write(json_out.dumps(document) + "\n")
    else:
        render_summary(outcome.run_id, outcome.results, outcome.metrics, wide)


ERROR_LOG = "kernel-agent.log"


def error_log() -> str:
    """Tracebacks of kernels whose loop failed go to ERROR_LOG in the current folder (beside the default
    runs.db), created only when one does; the table and the database get the one-line reason."""
    handler = logging.FileHandler(ERROR_LOG, delay=True)
    handler.setLevel(logging.ERROR)
    handler.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(name)s: %(message)s"))
    logging.getLogger("kernel_agent").addHandler(handler)
    return str(Path(ERROR_LOG).resolve())


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
    from kernel_agent.optimize.search_state import RunStatus

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
            store.finish_run(database, run_id, RunStatus.INTERRUPTED, "stopped by Ctrl-C")
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
    "needs_gpu": "needs GPU",
    "baseline_failed": "baseline failed",
    "too_large": "too large",
    "provider_failed": "provider failed",
    "no_device": "no device",
    "budget_reached": "budget reached",
    "interrupted": "interrupted",
    "error": "error",
}


def render_summary(run_id: int, results: list, metrics: dict | None = None, wide: bool = False) -> None:
    """The final table on stdout; reasons follow it, one line per kernel that has one (a flagged candidate
    waiting for review always has one, with the command that approves it). A run on several devices shows each
    kernel's device."""
    from kernel_agent.cli.end_table import Column, end_table, speedup_cell

    several = len({r.device for r in results}) > 1
    vs = [{kind: relative.to_json() for kind, relative in r.speedup_vs().items()} for r in results]
    columns = [
        Column("kernel", justify="left", folds=True),
        *([Column("device", justify="left")] if several else []),
        Column("baseline ms", drop_rank=3),
        Column("best ms", drop_rank=2),
        Column("speedup [95% CI]"),
        *(Column(kind) for kind in REFERENCE_COLUMNS),
        Column("best candidate", drop_rank=1),
        Column("status", justify="left"),
    ]
    rows = [
        [
            r.name,
            *([r.device] if several else []),
            f"{r.baseline_ms:.3f}" if r.baseline_ms else "-",
            f"{r.best_ms:.3f}" if r.best_ms else "-",
            r.pending() or speedup_cell(r.speedup, r.speedup_ci),  # `re-timing`: a wide early look
            *reference_cells(versus),
            str(r.best_candidate or "-"),
            STATUS_LABELS.get(r.status, r.status),
        ]
        for r, versus in zip(results, vs)
    ]
    table = end_table(columns, rows, stdout.width, wide, f"run {run_id}", f"{MS_CAPTION}; {REFERENCE_CAPTION}")
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
