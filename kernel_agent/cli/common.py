"""Shared CLI helpers: one-line errors on stderr with the right exit code.

Both consoles print with rich markup and emoji codes off: what they show is data (reasons,
notes, file names, candidate output) in which `[bold]` or `[/red]` is text, never a style.
Styles are applied with `rich.text.Text` (see `styled`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

from rich.console import Console
from rich.text import Text

stderr = Console(stderr=True, markup=False, emoji=False)
stdout = Console(markup=False, emoji=False)

EXIT_OK, EXIT_VERDICT, EXIT_USAGE = 0, 1, 2

# What the "ms" columns of run tables mean (the same numbers the speedup is made of).
MS_CAPTION = (
    "ms: geometric mean over benchmark shapes of per-shape medians; with a "
    "best candidate, both from its own A/B run (their ratio is the speedup)"
)


def styled(label: str, style: str, rest: str = "") -> Text:
    """`label` in `style`, then `rest` as plain text (never parsed as markup)."""
    return Text.assemble((label, style), rest)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one line naming the problem (and the fix) and exit."""
    stderr.print(styled("error:", "bold red", f" {message}"), highlight=False, soft_wrap=True)
    sys.exit(code)


def warn(message: str) -> None:
    stderr.print(styled("warning:", "yellow", f" {message}"), highlight=False)


def read_candidate(path: Path) -> str:
    """A candidate's source, or exit 2 with one line."""
    if not path.is_file():
        fail(f"{path}: no such candidate file")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{path}: cannot read the candidate: {exc}")
