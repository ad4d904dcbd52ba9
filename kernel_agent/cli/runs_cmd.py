"""`kernel-agent runs list|show`: what runs exist and what each found."""

from __future__ import annotations

import sys

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import MS_CAPTION, fail, stdout
from kernel_agent.cli.run_arg import RUN, resolve_run_or_fail
from kernel_agent.cli.speedups import (
    REFERENCE_CAPTION,
    REFERENCE_COLUMNS,
    losing_to_torch,
    print_metrics,
    record_cell,
    reference_cells,
)
from kernel_agent.core import json_out

app = typer.Typer(help="List runs and show one run's kernels and results.", no_args_is_help=True, rich_markup_mode=None)


@app.command("list")
def list_command(db: str = opt.DB, json_output: bool = opt.JSON) -> None:
    """Runs, newest first."""
    from rich.table import Table

    from kernel_agent.db.reads import list_runs

    runs = list_runs(opt.open_db(db))
    if json_output:
        sys.stdout.write(json_out.dumps(runs) + "\n")
        return
    table = Table(title="runs")
    for column in ("run", "started", "status", "provider", "kernels"):
        table.add_column(column)
    for run in runs:
        several = len(set(run["devices"])) > 1  # --device cpu,cuda: each kernel once per device
        kernels = [f"{k} ({d})" if several else k for k, d in zip(run["kernels"], run["devices"])]
        table.add_row(str(run["run_id"]), run["started"], run["status"], run["provider"], ", ".join(kernels))
    stdout.print(table)


def speed_classes(database, run_id: int) -> list[dict[str, int]]:
    """Per kernel of the run (in run_detail's order), how many of its timed candidates read each speed class;
    empty for verdicts stored without one."""
    from collections import Counter

    from kernel_agent.db.review_reads import run_kernels
    from kernel_agent.timing.speed_class import label

    return [
        dict(Counter(c for c in (label(cand.timing) for cand in k.candidates) if c))
        for k in run_kernels(database, run_id)
    ]


@app.command("show")
def show_command(run: str = RUN, db: str = opt.DB, json_output: bool = opt.JSON) -> None:
    """One run: per kernel, its status, baseline and best times, speedup and candidate counts by status, then each
    kernel's reason (a flagged candidate waiting for review, with the command that approves it)."""
    from rich.table import Table

    from kernel_agent.db.reads import run_detail

    database = opt.open_db(db)
    run_id = resolve_run_or_fail(database, run)
    detail = run_detail(database, run_id)
    if detail is None:
        fail(f"no run {run} in this database; `kernel-agent runs list` shows the runs")
    for kernel, classes in zip(detail["kernels"], speed_classes(database, run_id)):
        kernel["speed_classes"] = classes  # the four-way class: SAME, SLOW, AMBIGUOUS beside `correct`
    if json_output:
        sys.stdout.write(json_out.dumps(detail) + "\n")
        return
    llm = detail["llm"]
    stdout.print(
        f"run {detail['run_id']}  {detail['status']}  provider {detail['provider']}  started {detail['started']}  "
        f"LLM calls {llm['calls']} ({llm['prompt_tokens']}+{llm['completion_tokens']} tokens, ${llm['cost_usd']:.4f})",
        highlight=False,
    )
    if llm["calls"]:
        stdout.print(llm_line(llm), highlight=False, soft_wrap=True)
    table = Table(caption=f"{MS_CAPTION}; {REFERENCE_CAPTION}")
    several = len({k["device"] for k in detail["kernels"]}) > 1  # --device cpu,cuda: a row per kernel and device
    for column in (
        "kernel",
        *(("device",) if several else ()),
        "status",
        "rounds",
        "baseline ms",
        "best ms",
        "speedup",
        *REFERENCE_COLUMNS,
        "best candidate",
        "candidates by status",
    ):
        table.add_column(column)
    for k in detail["kernels"]:
        table.add_row(
            k["name"],
            *((k["device"],) if several else ()),
            k["status"],
            str(k["rounds"]),
            f"{k['baseline_ms']:.3f}" if k["baseline_ms"] else "-",
            f"{k['best_ms']:.3f}" if k["best_ms"] else "-",
            record_cell(k),
            *reference_cells(k["speedup_vs"]),
            str(k["best_candidate"] or "-"),
            ", ".join(f"{s} {n}" for s, n in sorted(k["statuses"].items()))
            + (
                f" ({', '.join(f'{c} {n}' for c, n in sorted(k['speed_classes'].items()))})"
                if k["speed_classes"]
                else ""
            ),
        )
    stdout.print(table)
    print_metrics(stdout, detail["metrics"])
    for k in detail["kernels"]:  # soft_wrap: a `kernel-agent review approve ...` command stays on one line to copy
        name = f"{k['name']} ({k['device']})" if several else k["name"]
        if k["reason"]:
            stdout.print(f"{name}: {k['reason']}", highlight=False, soft_wrap=True)
        lost = losing_to_torch(name, k["speedup_vs"])
        if lost:
            stdout.print(lost, highlight=False, soft_wrap=True)
        review = k.get("review")
        if review and review["note"] not in (k["reason"] or ""):
            stdout.print(f"{name}: {review['note']}", highlight=False, soft_wrap=True)


def llm_line(llm: dict) -> str:
    """The LLM's share of the run: reasoning tokens, and dollars and tokens per verified win."""
    thought = llm["reasoning_tokens"]
    reasoning = f"{thought} of the completion tokens were reasoning; " if thought else ""
    wins = llm["verified_wins"]
    if not wins:
        return f"LLM: {reasoning}no verified win yet (${llm['cost_usd']:.4f} spent)"
    return (
        f"LLM: {reasoning}{wins} verified win{'s' if wins != 1 else ''}: ${llm['usd_per_win']:.4f} and "
        f"{llm['tokens_per_win']:,.0f} tokens per win"
    )


@app.command("resume")
def resume_command(
    run: int = typer.Argument(..., help="Run id."),
    db: str = opt.DB,
    json_output: bool = opt.JSON,
    workers: int = typer.Option(None, min=1, help="Parallel evaluations (default: as stored with the run)."),
) -> None:
    """Continue a run that was interrupted or killed, from what the database holds."""
    from kernel_agent.cli.optimize_cmd import run_resume

    run_resume(opt.open_db(db), run, json_output, workers)
