"""Pull one candidate module out of a free-form LLM reply.

Why so defensive: replies are untrusted text of any shape (prose, several code
blocks, a usage snippet after the module, a cut-off reply). Every failure must
become a one-line reason that goes back to the model in the next prompt, so
nothing here may raise. Every reason and note leaving this module is `text.clean`ed
(it is stored and printed); code is never rewritten, so a module holding raw control
characters or invalid Unicode is refused with the reason instead.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kernel_agent.core.text import clean, has_raw_controls
from kernel_agent.evaluate.backends.lint import defines

PYTHON_TAGS = {"", "python", "py", "python3", "py3"}
_OPEN = re.compile(r"^[ \t]{0,3}(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
MAX_REASON = 300


@dataclass
class Block:
    """One fenced block of a reply."""

    tag: str
    body: str
    closed: bool


def fenced_blocks(reply: str) -> list[Block]:
    """Every fenced block in order (CommonMark-style: a closing fence is at least as long).

    Lines end at "\n" only (a trailing "\r" is dropped): `str.splitlines` would also split at
    form feeds, \x1c-\x1e and U+2028, silently rewriting code that `has_raw_controls` must see."""
    blocks: list[Block] = []
    lines = [line[:-1] if line.endswith("\r") else line for line in reply.split("\n")]
    if lines and not lines[-1]:
        lines.pop()  # the text after a final newline, as splitlines() would
    i = 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if not match:
            i += 1
            continue
        fence = match.group("fence")
        tag = (match.group("info").strip().split() or [""])[0].lower()
        closing = re.compile(rf"^[ \t]{{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), None)
        body = "\n".join(lines[i + 1 : end if end is not None else len(lines)])
        blocks.append(Block(tag, body + "\n", end is not None))
        i = (end if end is not None else len(lines)) + 1
    return blocks


def _defines(tree: ast.Module, name: str) -> bool:
    """`checks.defines`, plus annotated assignments (`kernel: Callable = ...`)."""
    if defines(tree, name):
        return True
    return any(
        isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == name for n in tree.body
    )


def check_module(source: str, entry_point: str) -> str | None:
    """None when `source` parses and defines `entry_point` at top level, else the reason."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        msg = " ".join(str(exc.msg).split())
        return f"code does not parse: SyntaxError: {msg} (line {exc.lineno})"
    except Exception as exc:  # null bytes (ValueError), absurd nesting (RecursionError, MemoryError)
        return f"code does not parse: {type(exc).__name__}: {' '.join(str(exc).split())}"
    if not _defines(tree, entry_point):
        return f"code defines no `{entry_point}` at top level"
    return None


def _one_line(text: str) -> str:
    return clean(text, MAX_REASON)


def usable(source: str, entry_point: str) -> str | None:
    """None when `source` can be evaluated as it is, else why not (see `check_module`, `has_raw_controls`)."""
    return check_module(source, entry_point) or has_raw_controls(source)


def _pick(blocks: list[Block], entry_point: str) -> tuple[str | None, str | None]:
    """The last block that works; otherwise the reason of the block most likely meant as the module."""
    for block in reversed(blocks):
        if usable(block.body, entry_point) is None:
            return block.body, None
    meant = [b for b in blocks if entry_point in b.body] or blocks
    block = meant[-1]
    reason = usable(block.body, entry_point) or "no usable code block"
    if not block.closed:
        reason += "; the code block is never closed (reply cut off?)"
    return None, reason


def extract_candidate(reply: str, entry_point: str) -> tuple[str | None, str | None]:
    """(source, None) for the candidate module in `reply`, else (None, one-line reason). Never raises."""
    try:
        return _extract(reply, entry_point)
    except Exception as exc:  # a last guard: a parser bug must not kill a run
        return None, _one_line(f"reply could not be read: {type(exc).__name__}: {exc}")


def _extract(reply: str, entry_point: str) -> tuple[str | None, str | None]:
    if not isinstance(reply, str) or not reply.strip():
        return None, "empty reply"
    blocks = fenced_blocks(reply)
    python = [b for b in blocks if b.tag in PYTHON_TAGS]
    if python:
        source, reason = _pick(python, entry_point)
        return source, None if source is not None else _one_line(reason or "")
    if check_module(reply, entry_point) is None:  # a bare module without fences (some local models)
        refused = has_raw_controls(reply)
        if refused:
            return None, _one_line(refused)
        return reply if reply.endswith("\n") else reply + "\n", None
    if blocks:
        tags = ", ".join(sorted({b.tag for b in blocks}))
        return None, _one_line(f"no ```python code block in the reply (only: {tags})")
    return None, "no fenced code block in the reply"


def summary_line(reply: str, limit: int = 160) -> str:
    """The first line of prose outside code blocks: the model's own one-line plan, for notes."""
    if not isinstance(reply, str):
        return ""
    inside = False
    for line in reply.splitlines():
        if _OPEN.match(line):  # opening and closing fences both match
            inside = not inside
            continue
        text = clean(line, limit).lstrip("#*->").strip()
        if not inside and text:
            return text
    return ""
