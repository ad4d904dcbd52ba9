"""What the pages claim about the code, checked against the code: a command line written in the guide or the
README must name a command the app has and options that command takes, so a renamed or removed option fails a
test instead of lingering in the docs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from docsite.blocks import ROOT, SHELL_LANGUAGES, blocks, command_lines
from docsite.cli_reference import resolve


@dataclass(frozen=True)
class Stale:
    """One documented command line that the app no longer takes, and why."""

    where: str
    line: str
    problem: str


def pages() -> list[Path]:
    """Every hand-written page with command lines: the README and the site's Markdown (reference pages are
    generated, so they are not files)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def stale(words: list[str]) -> str | None:
    """Why `kernel-agent WORDS` is not a command line the app takes, or None when it is."""
    try:
        command, _ = resolve(words)
    except LookupError as exc:
        return str(exc)
    if command.is_group:
        return f"{command.name} is a group, not a command"
    known = command.flags()
    unknown = [w.split("=")[0] for w in words if w.startswith("--") and w.split("=")[0] not in known]
    return f"{command.name} has no option {', '.join(unknown)}" if unknown else None


def stale_lines(paths: list[Path] | None = None) -> list[Stale]:
    found = []
    for path in pages() if paths is None else paths:
        for block in blocks(path, root=path.parent if path.name == "README.md" else ROOT / "docs"):
            if block.language not in SHELL_LANGUAGES:
                continue
            for words in command_lines(block.text):
                problem = stale(words)
                if problem:
                    found.append(Stale(block.where(), " ".join(["kernel-agent", *words]), problem))
    return found
