"""The `kernel-agent` command line: one thin module per command group.

Command modules import their heavy dependencies (database, LLM client) inside
the command bodies, so `kernel-agent eval` works where only torch is installed.
"""

from __future__ import annotations

import typer

from kernel_agent.cli import eval_cmd

app = typer.Typer(
    name="kernel-agent",
    help="Make kernels faster with an LLM in the loop; every speedup verified in a sandbox.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("eval")(eval_cmd.eval_command)


@app.callback()
def root() -> None:
    """kernel-agent: verified kernel optimization. Results on stdout; progress and warnings on stderr."""


def main() -> None:
    app()
