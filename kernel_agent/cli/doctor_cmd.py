"""`kernel-agent doctor`: what this machine gives the tool and what is missing, with the fix for each."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import stdout
from kernel_agent.core.config import EvalConfig, IsolationLevel

STYLES = {"ok": "green", "weak": "yellow", "missing": "red", "note": "cyan"}


def doctor_command(
    json_output: bool = opt.json_option("the checks as one JSON document"),
    db: str = opt.DB,
    isolation: IsolationLevel = typer.Option(
        EvalConfig().isolation, help="The level to check as an evaluation would get it (auto: the strongest here)."
    ),
    sandbox: Path = typer.Option(EvalConfig().sandbox_root, help="The --sandbox folder an evaluation would use."),
) -> None:
    """Check this machine: isolation level and why stronger ones fail, compilers, torch, GPUs, cgroups, huge pages,
    disk, database and LLM settings; each missing part with its fix."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from kernel_agent.doctor import survey
    from kernel_agent.sandbox.host.levels import attempts, notice

    checks = survey(db, sandbox, isolation.value)
    tried = attempts(isolation.value)
    if json_output:
        level = {
            "level": tried[-1].level if tried[-1].works else None,
            "fallback": notice(tried),
            "failed": [{"level": a.level, "why": a.why, "fix": a.fix} for a in tried if not a.works],
        }
        sys.stdout.write(json.dumps({"isolation": level, "checks": [c.to_dict() for c in checks]}) + "\n")
        return
    table = Table(title="kernel-agent doctor", show_lines=False)
    for column in ("check", "state", "found", "fix"):
        table.add_column(column, overflow="fold")
    area = None
    for c in checks:
        if area is not None and c.area != area:
            table.add_section()
        name, area = (f"{c.area}: {c.name}" if c.area != area else f"  {c.name}"), c.area
        table.add_row(name, Text(c.state.value, style=STYLES[c.state.value]), c.found, c.fix)
    console = stdout if stdout.is_terminal else Console(markup=False, emoji=False, width=160)
    console.print(table)
    line = notice(tried)
    if line:
        console.print(line, highlight=False, soft_wrap=True)


def print_fallback(preferred: str) -> None:
    """The doctor's one line on stderr when an evaluation here gets a weaker level than bwrap (auto only: a level
    the user named is no fallback), and one more when the sandbox uid cannot reach the interpreter there."""
    from kernel_agent.cli.common import stderr
    from kernel_agent.sandbox.host.levels import attempts, notice, unreachable

    tried = attempts(preferred)
    lines = [notice(tried) if preferred == IsolationLevel.AUTO else None]
    lines.append(unreachable(tried[-1].isolation) if tried[-1].isolation is not None else None)
    for line in filter(None, lines):
        stderr.print(line, highlight=False, soft_wrap=True)
