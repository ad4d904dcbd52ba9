"""Shared CLI helpers: one-line errors on stderr with the right exit code."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

from rich.console import Console

stderr = Console(stderr=True)
stdout = Console()

EXIT_OK, EXIT_VERDICT, EXIT_USAGE = 0, 1, 2

# What the "ms" columns of run tables mean (the same numbers the speedup is made of).
MS_CAPTION = "ms: geometric mean over benchmark shapes of per-shape medians; with a best candidate, both from its own A/B run (their ratio is the speedup)"


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one line naming the problem (and the fix) and exit."""
    stderr.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    sys.exit(code)


def read_candidate(path: Path) -> str:
    """A candidate's source, or exit 2 with one line."""
    if not path.is_file():
        fail(f"{path}: no such candidate file")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{path}: cannot read the candidate: {exc}")
