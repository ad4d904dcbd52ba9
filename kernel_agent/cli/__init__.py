"""The `kernel-agent` command line: one thin module per command group.

Every Typer app here has rich_markup_mode=None: rich would read brackets in help texts as
markup and drop them. Command modules import their heavy dependencies (database, LLM client) inside
the command bodies, so `kernel-agent eval` works where only torch is installed.
"""

from __future__ import annotations

import atexit
import os
import sys

import typer

from kernel_agent.cli import (
    candidates_cmd,
    db_cmd,
    doctor_cmd,
    e2e_cmd,
    eval_cmd,
    export_cmd,
    optimize_cmd,
    profile_cmd,
    regions_cmd,
    report_cmd,
    review_cmd,
    runs_cmd,
    select_cmd,
    tune_cmd,
    verify_cmd,
)

app = typer.Typer(
    name="kernel-agent",
    help="Make kernels faster with an LLM in the loop; every speedup verified in a sandbox.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts are plain text: `[[kernel]]` and `'kernel-agent[cluster]'` print as written
)
app.command("eval")(eval_cmd.eval_command)
app.command("optimize")(optimize_cmd.optimize_command)
app.command("profile")(profile_cmd.profile_command)
app.add_typer(runs_cmd.app, name="runs")
app.add_typer(candidates_cmd.app, name="candidates")
app.add_typer(db_cmd.app, name="db")
app.add_typer(review_cmd.app, name="review")
app.command("report")(report_cmd.report_command)
app.command("export")(export_cmd.export_command)
app.command("tune")(tune_cmd.tune_command)
app.add_typer(select_cmd.app, name="select")
app.command("doctor")(doctor_cmd.doctor_command)
app.command("verify-package")(verify_cmd.verify_package_command)
app.command("e2e")(e2e_cmd.e2e_command)
app.command("regions")(regions_cmd.regions_command)


@app.callback()
def root() -> None:
    """kernel-agent: verified kernel optimization. Results on stdout; progress and warnings on stderr."""


def main() -> None:
    """Run the command, then leave once Python's own exit handlers have run, without C++ static destructors.

    After finishing its work and storing it, a process that had run torch sometimes aborted in those
    destructors ("terminate called without an active exception", SIGABRT: seen in 2 of about 1,300 CLI runs of
    the suite, 2026-12-01 and 2026-12-03), so a finished command read as a crash."""
    try:
        app()
        code: object = 0
    except SystemExit as done:
        code = done.code
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()  # logging, temp folders and the database engines close as they would at exit
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code or 0)
