"""`kernel-agent candidates list|show|diff`: every candidate, its verdict and its code."""

from __future__ import annotations

import sys

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import fail, stdout
from kernel_agent.cli.speedups import early_look, interval_cell, record_cell
from kernel_agent.core import json_out

app = typer.Typer(
    help="List candidates, show one with its verdict, or print its diff.", no_args_is_help=True, rich_markup_mode=None
)


def _detail(db: str | None, candidate: int) -> dict:
    from kernel_agent.db.reads import candidate_detail

    detail = candidate_detail(opt.open_db(db), candidate)
    if detail is None:
        fail(f"no candidate {candidate} in this database; `kernel-agent candidates list` shows them")
    return detail


@app.command("list")
def list_command(
    run: int = typer.Option(None, help="Only this run."),
    kernel: str = typer.Option(None, help="Only this kernel."),
    db: str = opt.DB,
    json_output: bool = opt.JSON,
) -> None:
    """Candidates with their status and speedup."""
    from rich.table import Table

    from kernel_agent.db.reads import list_candidates

    rows = list_candidates(opt.open_db(db), run, kernel)
    if json_output:
        sys.stdout.write(json_out.dumps(rows) + "\n")
        return
    table = Table(title="candidates")
    for column in ("id", "run", "kernel", "round", "origin", "status", "speedup", "95% CI", "review", "note"):
        table.add_column(column)
    for c in rows:
        table.add_row(
            str(c["id"]),
            str(c["run_id"]),
            c["kernel"],
            str(c["round"]),
            c["origin"],
            c["status"],
            record_cell(c),
            interval_cell(c),
            f"{c['review']['decision']} ({c['review']['reviewer']})" if c["review"] else "-",
            "; ".join(part for part in (early_look(c), c["note"][:40]) if part),
        )
    stdout.print(table)


@app.command("show")
def show_command(
    candidate: int = typer.Argument(...),
    db: str = opt.DB,
    json_output: bool = opt.JSON,
    show_reasoning: bool = typer.Option(
        False, "--reasoning", help="Print the model's reasoning behind the candidate (folded by default)."
    ),
) -> None:
    """One candidate: verdict, reason, speedup and source (and the model's reasoning, folded)."""
    from rich.syntax import Syntax

    detail = _detail(db, candidate)
    if json_output:
        sys.stdout.write(json_out.dumps(detail) + "\n")
        return
    ci = detail["speedup_ci"]
    stdout.print(
        f"candidate {detail['id']} ({detail['kernel']}, run {detail['run_id']}, "
        f"round {detail['round']}, {detail['origin']}) {detail['status']}"
        + (f" {detail['speedup']:.3f}x [{ci[0]:.3f}, {ci[1]:.3f}]" if detail["speedup"] and ci else "")
        + (f" {detail['pending']}" if detail["pending"] else ""),
        highlight=False,
    )
    if detail["early_look"]:
        stdout.print(early_look(detail), highlight=False)
    if detail["reason"]:
        stdout.print(f"reason: {detail['reason']}", highlight=False)
    thought = detail.get("reasoning")
    if thought and show_reasoning:
        stdout.print(f"reasoning (never parsed as code):\n{thought}", markup=False, highlight=False)
    elif thought:
        stdout.print(f"reasoning: {len(thought)} characters (--reasoning shows it)", highlight=False)
    if detail["source"]:
        stdout.print(Syntax(detail["source"], "python", line_numbers=True))


@app.command("diff")
def diff_command(
    candidate: int = typer.Argument(...),
    against: str = typer.Option("baseline", help="baseline or parent."),
    db: str = opt.DB,
) -> None:
    """The unified diff of a candidate against the baseline or its parent."""
    if against not in ("baseline", "parent"):
        fail("--against must be baseline or parent")
    detail = _detail(db, candidate)
    text = detail["diff_baseline"] if against == "baseline" else detail["diff_parent"]
    sys.stdout.write(text if text else f"(no differences against the {against})\n")
