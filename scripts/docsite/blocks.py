"""The shell blocks of the guide's pages, read the way the doc tests run them: every ```` ```sh ```` block runs,
in page order, unless the line above it is `<!-- illustrative: REASON -->` (it needs an API key, a GPU, a cluster,
a terminal, or more time than CI has), and the reason is kept so a test can insist on one."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SHELL_LANGUAGES = ("sh", "bash", "shell")
_FENCE = re.compile(r"^```(\S*)\s*$")
_MARK = re.compile(r"^<!--\s*illustrative:(.*?)-->\s*$")
PROGRAM = "kernel-agent"


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its text, and why it does not run (None: it runs)."""

    page: str
    line: int
    language: str
    text: str
    illustrative: str | None

    @property
    def runs(self) -> bool:
        return self.language in SHELL_LANGUAGES and self.illustrative is None

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(path: Path, root: Path = DOCS) -> list[Block]:
    """Every fenced block of one Markdown page, in order."""
    lines = path.read_text().splitlines()
    found, index = [], 0
    page = str(path.relative_to(root)) if path.is_relative_to(root) else path.name
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        end = next((j for j in range(index + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        if end is None:
            raise ValueError(f"{page}:{index + 1}: a code block that never closes")
        mark = _MARK.match(lines[index - 1]) if index else None
        reason = mark.group(1).strip() if mark else None
        text = "\n".join(lines[index + 1 : end])
        found.append(Block(page, index + 1, opening.group(1), text, reason))
        index = end + 1
    return found


def guide_pages(root: Path = DOCS) -> list[Path]:
    """The guide's pages in reading order: the order the doc tests run them in (later pages use earlier runs)."""
    order = [
        "quickstart",
        "problems",
        "llm",
        "verdicts",
        "batch",
        "export",
        "tuning",
        "cluster",
        "gpu",
        "defences",
    ]
    pages = [root / "guide" / f"{name}.md" for name in order]
    extra = sorted(set((root / "guide").glob("*.md")) - set(pages))
    return pages + extra


def command_lines(text: str) -> list[list[str]]:
    """The words after `kernel-agent` of each command line of a shell block (continuations joined, heredocs
    and comments left out), for checking every documented command and option against the app."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found, heredoc = [], None
    for line in joined.splitlines():
        if heredoc is not None:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        opened = re.search(r"<<-?\s*'?(\w+)'?", line)
        if opened:
            heredoc = opened.group(1)
        if PROGRAM not in line:
            continue
        for words in _commands(line):
            while words and "=" in words[0] and not words[0].startswith("-"):  # VAR=value before a command
                words = words[1:]
            if words and Path(words[0]).name == PROGRAM:
                found.append(words[1:])
    return found


def _commands(line: str) -> list[list[str]]:
    """A shell line's simple commands: its words, split at `&&`, `||`, `;`, `|` and `&` outside quotes,
    redirections left out."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    commands: list[list[str]] = [[]]
    redirected = False
    for token in lexer:
        if redirected:  # the file a redirection names
            redirected = False
        elif token and set(token) <= set("<>"):
            redirected = True
        elif token and set(token) <= set("&|;"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]
