"""Shared CLI helpers: one-line errors on stderr with the right exit code."""

from __future__ import annotations

import sys
from typing import NoReturn

from rich.console import Console

stderr = Console(stderr=True)
stdout = Console()

EXIT_OK, EXIT_VERDICT, EXIT_USAGE = 0, 1, 2


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one line naming the problem (and the fix) and exit."""
    stderr.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    sys.exit(code)
