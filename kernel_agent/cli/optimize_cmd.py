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

PROVIDER_KEYS = ("base_url", "model", "temperature", "max_tokens", "request_timeout", "max_retries", "prompts_dir", "prices_file", "api_key_file", "replay_run")


def optimize_command(
    kernels: list[str] = typer.Argument(None, help="Problem folders, KernelBench .py files, folders of problems, or globs."),
    manifest: Path = typer.Option(None, help="TOML manifest: [[kernel]] tables with path and per-kernel options."),
    resume: int = typer.Option(None, help="Continue run RUN where it stopped (its stored plan is used)."),
    provider: str = typer.Option("search", help="search (offline tunables search), openai, replay, or a plugin."),
    rounds: int = typer.Option(3, min=1, help="Proposal rounds per kernel."),
    samples: int = typer.Option(4, min=1, help="Candidates per round."),
    beam: int = typer.Option(2, min=1, help="Best accepted variants kept as parents."),
    patience: int = typer.Option(2, min=1, help="Stop a kernel after this many rounds without a better variant."),
    roofline_stop: float = typer.Option(0.9, min=0, help="Stop a kernel once its best reaches this fraction of the roofline floor (0: never)."),
    workers: int = typer.Option(None, min=1, help="Parallel evaluations (default: one per GPU; 2 on a CPU). Timed runs never overlap on a device."),
    executor: str = typer.Option(None, "--executor", help="Where evaluations run: local (default; this machine) or ray (a Ray cluster; pip install 'kernel-agent[cluster]'). Stored with the run."),
    ray_address: str = typer.Option(None, "--ray-address", help="Ray head to join, e.g. HEAD:6379 (--executor ray; default: start a local Ray on this machine)."),
    concurrency: int = typer.Option(4, min=1, help="LLM requests in flight at once."),
    max_candidates: int = typer.Option(None, min=1, help="Run budget: candidates evaluated."),
    max_tokens: int = typer.Option(None, min=1, help="Run budget: LLM tokens (prompt + completion)."),
    max_cost: float = typer.Option(None, min=0, help="Run budget: USD, from the model price table (--prices adds models)."),
    time_limit: float = typer.Option(None, min=1, help="Run budget: wall-clock seconds."),
    base_url: str = typer.Option("https://api.openai.com/v1", help="OpenAI-compatible endpoint (provider openai)."),
    model: str = typer.Option("gpt-4o-mini", help="Model name (provider openai)."),
    api_key_file: Path = typer.Option(None, help="File holding the API key (default: $OPENAI_API_KEY)."),
    prices: Path = typer.Option(None, help="TOML file of extra model prices: [prices] \"model\" = [usd_per_1M_in, usd_per_1M_out]."),
    temperature: float = typer.Option(0.7),
    max_tokens_per_reply: int = typer.Option(8192, "--max-tokens-per-reply"),
    request_timeout: float = typer.Option(300.0, help="Seconds per LLM request."),
    retries: int = typer.Option(4, help="Retries on 429, 5xx, timeouts and dropped connections."),
    prompts: Path = typer.Option(None, help="Folder of jinja2 templates overriding the packaged prompts."),
    replay_run: int = typer.Option(None, help="Run whose recorded LLM replies `--provider replay` replays."),
    device: str = opt.DEVICE,
    timeout: float = opt.TIMEOUT,
    min_gain: float = opt.MIN_GAIN,
    sanity_speedup: float = typer.Option(10.0, "--sanity-speedup", min=1.0,
                                         help="A speedup above this is flagged for human review (kernel-agent review) instead of accepted."),
    sandbox: Path = opt.SANDBOX,
    threads: int = opt.THREADS,
    db: str = opt.DB,
    json_output: bool = opt.JSON,
) -> None:
    """Optimize kernels: baseline, then rounds of propose -> verify -> time -> keep the best."""
    from kernel_agent.optimize.run import KernelSpec, PlanError, RunPlan, expand_paths, load_manifest

    if executor not in (None, "local", "ray"):
        fail(f"--executor must be local or ray, not {executor!r}")
    if ray_address and executor == "local":
        fail("--ray-address needs --executor ray")
    database = opt.open_db(db)
    if resume is not None:
        run_resume(database, resume, json_output, workers, executor, ray_address)
        return
    if device not in ("auto", "cpu", "cuda"):
        fail(f"--device must be auto, cpu or cuda, not {device!r}")
    executor = executor or ("ray" if ray_address else "local")
    if not kernels and manifest is None:
        fail("name the kernels to optimize (problem folders, KernelBench files, globs) or pass --manifest FILE.toml")
    try:
        specs = [KernelSpec(path=p) for p in expand_paths(kernels or [])]
        if manifest is not None:
            specs += load_manifest(manifest)
    except PlanError as exc:
        fail(str(exc))
    provider_options = {
        "base_url": base_url, "model": model, "temperature": temperature, "max_tokens": max_tokens_per_reply, "request_timeout": request_timeout,
        "max_retries": retries, "prompts_dir": str(prompts) if prompts else None, "prices_file": str(prices) if prices else None,
        "api_key_file": str(api_key_file) if api_key_file else None, "replay_run": replay_run,
    }
    if provider == "replay" and replay_run is None:
        fail("--provider replay needs --replay-run RUN (the run whose recorded replies to replay)")
    plan = RunPlan(
        kernels=specs, provider=provider, provider_options=provider_options if provider != "search" else {}, rounds=rounds, samples=samples,
        beam=beam, patience=patience, roofline_stop=roofline_stop, device=device, timeout=timeout, min_gain=min_gain, sanity_speedup=sanity_speedup, threads=threads,
        sandbox=str(sandbox),
        workers=workers, concurrency=concurrency, executor=executor, ray_address=ray_address,
        budget={"max_candidates": max_candidates, "max_tokens": max_tokens, "max_cost": max_cost, "time_limit": time_limit},
    )
    execute(database, plan, None, json_output)


def run_resume(database, run_id: int, json_output: bool, workers: int | None = None, executor: str | None = None, ray_address: str | None = None) -> None:
    """Continue a stored run with its stored plan (--workers, --executor and --ray-address may change where it runs)."""
    from kernel_agent.db.models import RunRow
    from kernel_agent.optimize.run import RunPlan

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
        plan.ray_address = ray_address if executor == "ray" else None
    elif ray_address:
        plan.executor, plan.ray_address = "ray", ray_address
    execute(database, plan, run_id, json_output)


def build_providers(database, plan, problems) -> dict:
    """One provider per kernel name (replay is per kernel; the others are shared)."""
    from kernel_agent.db import writes as store
    from kernel_agent.propose import make_provider
    from kernel_agent.propose.openai_chat import load_prices

    options = dict(plan.provider_options)
    if plan.provider == "replay":
        return {p.name: make_provider("replay", calls=store.recorded_calls(database, options["replay_run"], p.name)) for _, p in problems}
    if plan.provider == "openai":
        prices_file = options.pop("prices_file", None)
        options["prices"] = load_prices(Path(prices_file)) if prices_file else None
        options["prompts_dir"] = Path(options["prompts_dir"]) if options.get("prompts_dir") else None
        options["api_key_file"] = Path(options["api_key_file"]) if options.get("api_key_file") else None
        options.pop("replay_run", None)
        options["n"] = plan.samples
    else:
        options = {k: v for k, v in options.items() if k not in PROVIDER_KEYS}
    shared = make_provider(plan.provider, **options)
    return {p.name: shared for _, p in problems}


def execute(database, plan, run_id: int | None, json_output: bool) -> None:
    from kernel_agent.cli.progress import LoopProgress
    from kernel_agent.db import writes as store
    from kernel_agent.evaluate.pipeline import run_device
    from kernel_agent.optimize.run import BatchRun, device_ceilings, load_kernel, store_plan
    from kernel_agent.problem.canaries import audit_problem
    from kernel_agent.problem.load import ProblemError
    from kernel_agent.propose.openai_chat import ProviderConfigError

    problems = []
    for spec in plan.kernels:
        try:
            problem = load_kernel(spec)
            for warning in audit_problem(problem, run_device(problem, plan.device)):
                warn(warning)
        except ProblemError as exc:
            fail(str(exc))
        problems.append((spec, problem))
    names = [p.name for _, p in problems]
    if len(set(names)) != len(names):
        fail(f"two kernels share a name ({', '.join(sorted({n for n in names if names.count(n) > 1}))}); pass each problem once")
    try:
        providers = build_providers(database, plan, problems)
    except (ProviderConfigError, ValueError) as exc:
        fail(str(exc))
    if run_id is None:
        run_id = store_plan(database, plan, plan.provider_options.get("model") if plan.provider == "openai" else None)
        stderr.print(f"run {run_id}: {len(problems)} kernel(s), provider {plan.provider}, database {database.display_url}", highlight=False)
    else:
        store.reopen_run(database, run_id)
        stderr.print(f"resuming run {run_id}: {len(problems)} kernel(s), provider {plan.provider}, database {database.display_url}", highlight=False)
    executor = build_executor(plan)
    progress = LoopProgress(stderr, names, plan.rounds)
    timed_devices = {run_device(p, plan.device) for _, p in problems if not (p.device == "cuda" and run_device(p, plan.device) == "cpu")}
    ceilings = device_ceilings(database, timed_devices, plan.eval_options().threads)
    batch = BatchRun(database, run_id, plan, problems, providers, executor, progress.event, ceilings=ceilings)
    results = run_until_interrupted(batch, progress, database, run_id)
    executor.shutdown()
    if results and all(r.status == "provider_failed" for r in results):
        store.finish_run(database, run_id, "failed", results[-1].reason)
        fail(f"{results[-1].reason}; check --base-url, the key and the endpoint, then rerun")
    unfinished = [r for r in results if r.status in ("interrupted", "budget_reached")]
    store.finish_run(database, run_id, "stopped" if unfinished else "completed", "; ".join(sorted({r.reason for r in unfinished})))
    if json_output:
        sys.stdout.write(json.dumps({"run_id": run_id, "kernels": [r.to_dict() for r in results]}) + "\n")
    else:
        render_summary(run_id, results)


def build_executor(plan):
    """The plan's executor: this machine's pool, or Ray (a local instance, or the cluster at plan.ray_address)."""
    if plan.executor == "ray":
        from kernel_agent.optimize.executors.ray import RayExecutor, RayUnavailable

        try:
            executor = RayExecutor(plan.ray_address, plan.workers)
        except RayUnavailable as exc:
            fail(str(exc))
        where = plan.ray_address or "a local Ray instance"
        stderr.print(f"executor: Ray at {where} ({executor.gpus} GPU(s), {executor.cpu_slots} CPU timing slot(s))", highlight=False)
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
            stderr.print(f"stopping: letting evaluations in flight finish (Ctrl-C again to stop now). Resume with: kernel-agent optimize --resume {run_id}", highlight=False)
            try:
                while worker.is_alive():
                    worker.join(0.2)
            except KeyboardInterrupt:
                pass
            stderr.print(f"interrupted: run {run_id} is saved; resume with: kernel-agent optimize --resume {run_id}", highlight=False)
            sys.stderr.flush()
            # Sandboxed workers die with this process; an evaluation cut short is redone on resume.
            os._exit(130)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["results"]


STATUS_LABELS = {
    "improved": "improved", "needs_review": "needs review", "no_gain": "no gain", "needs_gpu": "verified; needs a GPU", "baseline_failed": "baseline failed",
    "provider_failed": "provider failed", "budget_reached": "budget reached", "interrupted": "interrupted",
}


def render_summary(run_id: int, results: list) -> None:
    """The final table on stdout; reasons follow it, one line per kernel that has one (a flagged candidate
    waiting for review always has one, with the command that approves it)."""
    from rich.table import Table

    table = Table(title=f"run {run_id}", caption=MS_CAPTION)
    for column in ("kernel", "baseline ms", "best ms", "speedup", "best candidate", "status"):
        table.add_column(column, justify="right" if column not in ("kernel", "status") else "left", no_wrap=column == "kernel")
    for r in results:
        table.add_row(
            r.name, f"{r.baseline_ms:.3f}" if r.baseline_ms else "-", f"{r.best_ms:.3f}" if r.best_ms else "-",
            f"{r.speedup:.2f}x" if r.speedup else "-", str(r.best_candidate or "-"), STATUS_LABELS.get(r.status, r.status),
        )
    stdout.print(table)
    for r in results:
        if r.reason:  # soft_wrap: a `kernel-agent review approve ...` command stays on one line to copy
            stdout.print(f"{r.name}: {r.reason}", highlight=False, soft_wrap=True)
    stdout.print(f"details: kernel-agent runs show {run_id}; code: kernel-agent candidates diff ID", highlight=False)
