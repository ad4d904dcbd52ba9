"""`kernel-agent review RUN | approve CAND | reject CAND`: a human decides what may ship.

`review RUN` is the default action of the group: any first word that is not a
subcommand is taken as RUN (so `review 3`, `review latest` and
`review approve 7` all work as written).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import fail, stderr, stdout
from kernel_agent.cli.run_arg import RUN, resolve_run_or_fail
from kernel_agent.core.verdict import Status

if TYPE_CHECKING:  # the database and measure modules load inside the commands
    from kernel_agent.core.of_record import NumberOfRecord
    from kernel_agent.db.review_reads import CandidateRecord
    from kernel_agent.db.session import Database

PAST = {"approve": "approved", "reject": "rejected"}
ANSWERS = {
    "a": "approve",
    "approve": "approve",
    "r": "reject",
    "reject": "reject",
    "s": "skip",
    "skip": "skip",
    "": "skip",
    "q": "quit",
    "quit": "quit",
}


class DefaultToStart(TyperGroup):
    """A group whose unknown first word runs the `start` subcommand with it as RUN."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["start", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=DefaultToStart,
    help="Review accepted and flagged candidates: `review RUN`, `review approve CAND`, `review reject CAND`.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


SERVE = typer.Option(False, "--serve", help="Review in the browser: a local page on 127.0.0.1 until Ctrl-C.")
PORT = typer.Option(0, "--port", min=0, max=65535, help="The page's port with --serve (0: a free one).")
NO_OPEN = typer.Option(False, "--no-open", help="With --serve, only print the page's URL (no browser).")


@app.command("start")
def start_command(
    run: str = RUN,
    kernel: str = typer.Option(None, "--kernel", help="Only this kernel."),
    serve: bool = SERVE,
    port: int = PORT,
    no_open: bool = NO_OPEN,
    db: str = opt.DB,
) -> None:
    """Walk each kernel's accepted and flagged candidates, best first, and approve, reject or skip each
    (`--serve`: the same in the browser, with side-by-side diffs and keyboard navigation)."""
    from kernel_agent.review.decisions import queue, record

    database = opt.open_db(db)
    run_id = resolve_run_or_fail(database, run)
    if serve:
        if kernel:
            fail("--kernel is for the terminal walk; the page shows every kernel of the run")
        serve_page(database, run_id, "", port, not no_open)
        return
    items = queue(database, run_id, kernel)
    if kernel and not items:
        fail(f"run {run_id} has no kernel {kernel!r}")
    total = sum(len(candidates) for _, candidates in items)
    if total == 0:
        stdout.print(f"run {run_id}: no accepted or flagged candidates to review", highlight=False)
        return
    decided = 0
    for kernel_record, candidates in items:
        for candidate in candidates:
            show_candidate(candidate, kernel_record.number_of(candidate))
            answer = ask_decision()
            if answer == "quit":
                stdout.print(f"stopped; {decided} decision(s) recorded", highlight=False)
                return
            if answer == "skip":
                continue
            note = ask_note()
            saved = record(database, candidate.id, answer, note)
            decided += 1
            stdout.print(
                f"candidate {saved.candidate_id} ({kernel_record.name}): {PAST[saved.decision]} by {saved.reviewer}",
                highlight=False,
            )
    stdout.print(f"done; {decided} decision(s) recorded", highlight=False)


def serve_page(database: Database, run_id: int, page: str, port: int, open_browser: bool) -> None:
    """Serve the run's review page (or its report) on 127.0.0.1: the URL on stdout, stopped by Ctrl-C."""
    from kernel_agent.review.decisions import current_reviewer
    from kernel_agent.review.web import serve

    def announce(url: str) -> None:
        stdout.print(url, highlight=False, soft_wrap=True)
        stderr.print(f"run {run_id}: review page on 127.0.0.1 (Ctrl-C stops it)", highlight=False)
        sys.stdout.flush()

    try:
        serve(database, run_id, current_reviewer(), port, page, open_browser, announce)
    except OSError as exc:
        fail(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}")
    stderr.print("review page stopped", highlight=False)


def ask_decision() -> str:
    """approve / reject / skip / quit; end of input means quit (works with a pipe on stdin)."""
    while True:
        try:
            raw = typer.prompt("decision: [a]pprove, [r]eject, [s]kip, [q]uit", default="s", show_default=False)
        except typer.Abort:
            return "quit"
        answer = ANSWERS.get(raw.strip().lower())
        if answer:
            return answer
        stdout.print(f"unknown answer {raw!r}; type a, r, s or q", highlight=False)


def ask_note() -> str:
    try:
        return typer.prompt("note (optional)", default="", show_default=False)
    except typer.Abort:
        return ""


def show_candidate(candidate: CandidateRecord, number: NumberOfRecord) -> None:
    """The verdict summary (speedup and times: the candidate's number of record, its superseded early look
    labelled), then the diffs against the baseline and (when different) the parent."""
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.text import Text

    passed, checked = candidate.checks_passed
    lines = [
        f"status     {candidate.status}" + (f"  ({candidate.reason})" if candidate.reason else ""),
        *speedup_lines(number),
        f"checks     {passed}/{checked} passed ({', '.join(candidate.dtypes) or '-'})",
        f"device     {candidate.device} ({candidate.device_name})",
        f"isolation  {candidate.isolation}",
        f"flags      {'; '.join(candidate.flags) if candidate.flags else 'none'}",
        f"origin     {candidate.origin}, round {candidate.round}, parent {candidate.parent_id}"
        + (f"  note: {candidate.note}" if candidate.note else ""),
    ]
    if candidate.decision:
        d = candidate.decision
        lines.append(
            f"reviewed   {d.decision} by {d.reviewer} at {d.created_at.isoformat(timespec='seconds')}"
            + (f": {d.note}" if d.note else "")
        )
    title = f"candidate {candidate.id}  {candidate.kernel}  run {candidate.run_id}"
    stdout.print(
        Panel(
            Text("\n".join(lines)),
            title=Text(title),
            title_align="left",
            border_style="red" if candidate.status == Status.FLAGGED else "green",
        ),
        highlight=False,
    )
    stdout.print("diff against the baseline:", highlight=False)
    stdout.print(Syntax(candidate.diff_baseline or "(no differences)\n", "diff", theme="ansi_dark", word_wrap=True))
    if candidate.diff_parent and candidate.diff_parent.replace("parent/", "baseline/") != candidate.diff_baseline:
        stdout.print(f"diff against the parent (candidate {candidate.parent_id}):", highlight=False)
        stdout.print(Syntax(candidate.diff_parent, "diff", theme="ansi_dark", word_wrap=True))


def speedup_lines(number: NumberOfRecord) -> list[str]:
    """The speedup, interval and times a review shows: the number of record (a faster re-timing with every
    round over the early look, which follows labelled), or `re-timing` while a wide early look is withheld."""
    quoted = number.quoted
    if quoted is None or quoted.speedup is None:
        return [f"speedup    {number.cell(3)}", "times      -"]
    low, high = quoted.ci or (None, None)
    ci = f"[{low:.3f}, {high:.3f}]" if low is not None else "-"
    retimed = f" (re-timed with all rounds: candidate {quoted.candidate})" if number.superseded else ""
    lines = [f"speedup    {quoted.speedup:.3f}x, 95% interval {ci}{retimed}"]
    if number.early_look is not None:
        early = number.early_look
        lines.append(f"early look {early.text()} (superseded)")
    if quoted.baseline_ms and quoted.candidate_ms:
        lines.append(f"times      baseline {quoted.baseline_ms:.4f} ms -> candidate {quoted.candidate_ms:.4f} ms")
    else:
        lines.append("times      -")
    return lines


def _decide(candidate: int, decision: str, note: str, db: str | None) -> None:
    from kernel_agent.review.decisions import ReviewError, record

    try:
        saved = record(opt.open_db(db), candidate, decision, note)
    except ReviewError as exc:
        fail(str(exc))
    stdout.print(
        f"candidate {saved.candidate_id}: {PAST[saved.decision]} by {saved.reviewer}"
        + (f" ({saved.note})" if saved.note else ""),
        highlight=False,
    )


@app.command("approve")
def approve_command(
    candidate: int = typer.Argument(..., help="Candidate id."),
    note: str = typer.Option("", "--note", help="Why."),
    db: str = opt.DB,
) -> None:
    """Approve a candidate (a flagged candidate ships only after this)."""
    _decide(candidate, "approve", note, db)


@app.command("reject")
def reject_command(
    candidate: int = typer.Argument(..., help="Candidate id."),
    note: str = typer.Option("", "--note", help="Why."),
    db: str = opt.DB,
) -> None:
    """Reject a candidate: it is never exported (until a later approve)."""
    _decide(candidate, "reject", note, db)
