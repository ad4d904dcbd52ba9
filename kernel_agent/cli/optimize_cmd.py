"""`kernel-agent optimize KERNEL...`: find faster verified variants and store everything."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import fail, stderr, stdout


def collect_problems(paths: list[Path]) -> list[Path]:
    """Problem folders and KernelBench files; a folder of problem folders expands to its members."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir() and not (path / "problem.py").is_file():
            members = sorted(p for p in path.iterdir() if p.is_dir() and (p / "problem.py").is_file())
            if not members:
                fail(f"{path}: holds no problem folders (folders with problem.py and kernel.py)")
            found += members
        else:
            found.append(path)
    return found


def optimize_command(
    kernels: list[Path] = typer.Argument(..., help="Problem folders, KernelBench .py files, or folders of problems."),
    provider: str = typer.Option("search", help="search (offline tunables search), openai, replay, or a plugin."),
    rounds: int = typer.Option(3, min=1, help="Proposal rounds per kernel."),
    samples: int = typer.Option(4, min=1, help="Candidates per round."),
    beam: int = typer.Option(2, min=1, help="Best accepted variants kept as parents."),
    patience: int = typer.Option(2, min=1, help="Stop a kernel after this many rounds without a better variant."),
    base_url: str = typer.Option("https://api.openai.com/v1", help="OpenAI-compatible endpoint (provider openai)."),
    model: str = typer.Option("gpt-4o-mini", help="Model name (provider openai)."),
    api_key_file: Path = typer.Option(None, help="File holding the API key (default: $OPENAI_API_KEY)."),
    temperature: float = typer.Option(0.7),
    max_tokens: int = typer.Option(8192),
    request_timeout: float = typer.Option(300.0, help="Seconds per LLM request."),
    retries: int = typer.Option(4, help="Retries on 429, 5xx, timeouts and dropped connections."),
    prompts: Path = typer.Option(None, help="Folder of jinja2 templates overriding the packaged prompts."),
    replay_run: int = typer.Option(None, help="Run whose recorded LLM replies `--provider replay` replays."),
    device: str = opt.DEVICE,
    timeout: float = opt.TIMEOUT,
    min_gain: float = opt.MIN_GAIN,
    sandbox: Path = opt.SANDBOX,
    threads: int = opt.THREADS,
    db: str = opt.DB,
    json_output: bool = opt.JSON,
) -> None:
    """Optimize kernels: baseline, then rounds of propose -> verify -> time -> keep the best."""
    from kernel_agent.audit import audit_problem
    from kernel_agent.db import store
    from kernel_agent.evaluate import EvalOptions, run_device
    from kernel_agent.loop import KernelLoop, LoopOptions
    from kernel_agent.problem import ProblemError, load_problem
    from kernel_agent.providers import make_provider
    from kernel_agent.providers.openai_chat import ProviderConfigError

    if device not in ("auto", "cpu", "cuda"):
        fail(f"--device must be auto, cpu or cuda, not {device!r}")
    problems = []
    for path in collect_problems(kernels):
        try:
            problem = load_problem(path)
            for warning in audit_problem(problem, run_device(problem, device)):
                stderr.print(f"[yellow]warning:[/] {warning}", highlight=False)
        except ProblemError as exc:
            fail(str(exc))
        problems.append(problem)
    database = opt.open_db(db)
    provider_options: dict = {}
    if provider == "openai":
        provider_options = dict(base_url=base_url, model=model, api_key_file=api_key_file, temperature=temperature, n=samples,
                                max_tokens=max_tokens, request_timeout=request_timeout, max_retries=retries, prompts_dir=prompts)
    elif provider == "replay":
        if replay_run is None:
            fail("--provider replay needs --replay-run RUN (the run whose recorded replies to replay)")
    try:
        providers = {}
        for problem in problems:
            if provider == "replay":
                calls = store.recorded_calls(database, replay_run, problem.name)
                providers[problem.name] = make_provider("replay", calls=calls)
            elif not providers:
                shared = make_provider(provider, **provider_options)
                providers = {p.name: shared for p in problems}
    except (ProviderConfigError, ValueError) as exc:
        fail(str(exc))
    eval_options = EvalOptions(device=device, timeout=timeout, min_gain=min_gain, sandbox_root=sandbox)
    if threads:
        eval_options.threads = threads
    loop_options = LoopOptions(rounds=rounds, samples=samples, beam=beam, patience=patience, eval=eval_options)
    run_options = {"rounds": rounds, "samples": samples, "beam": beam, "patience": patience, "device": device, "timeout": timeout,
                   "min_gain": min_gain, "threads": eval_options.threads, "kernels": [str(p.path) for p in problems], "base_url": base_url if provider == "openai" else None,
                   "replay_run": replay_run}
    run_id = store.create_run(database, provider, model if provider == "openai" else None, run_options)
    stderr.print(f"run {run_id}: {len(problems)} kernel(s), provider {provider}, database {database.url}", highlight=False)
    results = []
    from kernel_agent.cli.progress import LoopProgress

    try:
        with LoopProgress(stderr, [p.name for p in problems]) as progress:
            for problem in problems:
                loop = KernelLoop(database, run_id, problem, providers[problem.name], loop_options, progress.event)
                results.append(loop.run())
    except KeyboardInterrupt:
        store.finish_run(database, run_id, "interrupted", "stopped by Ctrl-C")
        stderr.print(f"interrupted: run {run_id} is saved in {database.url}", highlight=False)
        raise typer.Exit(130) from None
    if results and all(r.status == "provider_failed" for r in results):
        store.finish_run(database, run_id, "failed", results[-1].reason)
        fail(f"{results[-1].reason}; check --base-url, the key and the endpoint, then rerun")
    store.finish_run(database, run_id, "completed")
    if json_output:
        sys.stdout.write(json.dumps({"run_id": run_id, "kernels": [r.to_dict() for r in results]}) + "\n")
    else:
        render_summary(run_id, results)


STATUS_LABELS = {"improved": "improved", "no_gain": "no gain", "needs_gpu": "verified; needs a GPU", "baseline_failed": "baseline failed", "provider_failed": "provider failed"}


def render_summary(run_id: int, results: list) -> None:
    """The final table on stdout; reasons follow it, one line per kernel that did not improve."""
    from rich.table import Table

    table = Table(title=f"run {run_id}")
    for column in ("kernel", "baseline ms", "best ms", "speedup", "best candidate", "status"):
        table.add_column(column, justify="right" if column not in ("kernel", "status") else "left", no_wrap=column == "kernel")
    for r in results:
        table.add_row(
            r.name, f"{r.baseline_ms:.3f}" if r.baseline_ms else "-", f"{r.best_ms:.3f}" if r.best_ms else "-",
            f"{r.speedup:.2f}x" if r.speedup else "-", str(r.best_candidate or "-"), STATUS_LABELS.get(r.status, r.status),
        )
    stdout.print(table)
    for r in results:
        if r.reason:
            stdout.print(f"{r.name}: {r.reason}", highlight=False)
    stdout.print(f"details: kernel-agent runs show {run_id}; code: kernel-agent candidates diff ID", highlight=False)
