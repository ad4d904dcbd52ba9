"""Read and rewrite a kernel's tunables in its source, touching nothing else.

A tunable named in a problem's TUNABLES lives in the kernel source as either
- a module-level assignment of a literal (`BLOCK_SIZE = 64`, `NUM_WARPS: int = 4`), or
- a `#define NAME value` line inside a string literal of a module-level statement
  (the C++ source handed to the compiler, e.g. `CPP_SOURCE = r\"\"\"...\"\"\"`).

Edits are made on the exact text span of the value (AST positions for Python,
regex match offsets for `#define`), so comments, spacing and every other line
stay byte-identical and a candidate's diff against its parent is just the values.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

Value = Any  # int | float | bool | str
_LITERAL_TYPES = (bool, int, float, str)


class TunableError(ValueError):
    """A tunable that cannot be read or written in a source (one-line reason naming it)."""


@dataclass(frozen=True)
class _Site:
    """Where one occurrence of a tunable's value lives: a half-open character span."""

    start: int
    end: int
    value: Value
    kind: str  # "python" or "define"


def read_config(source: str, names: list[str]) -> dict[str, Value]:
    """The current value of each named tunable; TunableError when one is missing."""
    tree = _parse(source)
    starts = _line_starts(source)
    return {name: _sites(tree, source, starts, name)[-1].value for name in names}


def apply_config(source: str, config: dict[str, Value]) -> str:
    """The source with each tunable set to its new value; everything else unchanged."""
    tree = _parse(source)
    starts = _line_starts(source)
    edits: list[tuple[int, int, str]] = []
    for name, value in config.items():
        for site in _sites(tree, source, starts, name):
            if _same(site.value, value):
                continue  # keep the original spelling (0x40, 1_024) when nothing changes
            edits.append((site.start, site.end, _format(name, value, site.kind)))
    for start, end, text in sorted(edits, reverse=True):
        source = source[:start] + text + source[end:]
    return source


def config_note(config: dict[str, Value]) -> str:
    """A short human label for a config, e.g. `BLOCK_SIZE=128 NUM_WARPS=4`."""
    return " ".join(f"{name}={value}" for name, value in config.items())


def _parse(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise TunableError(f"cannot read tunables: source does not parse (line {exc.lineno}: {exc.msg})") from None


def _line_starts(source: str) -> list[int]:
    """Character offset of each line start, using the same terminators as the tokenizer."""
    return [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", source))]


def _offset(source: str, starts: list[int], lineno: int, col_byte: int) -> int:
    """AST positions count UTF-8 bytes within a line; turn one into a character offset."""
    line_start = starts[lineno - 1]
    line = source[line_start : starts[lineno] if lineno < len(starts) else len(source)]
    return line_start + len(line.encode("utf-8")[:col_byte].decode("utf-8"))


def _sites(tree: ast.Module, source: str, starts: list[int], name: str) -> list[_Site]:
    """Every place the tunable is set: Python literal assignments win over #define lines."""
    python, non_literal = _python_sites(tree, source, starts, name)
    if python:
        return python
    defines = _define_sites(tree, source, starts, name)
    if defines:
        return defines
    if non_literal is not None:
        raise TunableError(
            f"tunable {name}: assigned a non-literal expression at line {non_literal}; use a plain literal"
        )
    raise TunableError(
        f"tunable {name}: no module-level `{name} = <literal>` and no `#define {name} <value>` in the source"
    )


def _python_sites(tree: ast.Module, source: str, starts: list[int], name: str) -> tuple[list[_Site], int | None]:
    """Module-level `NAME = literal` / `NAME: T = literal`; also the line of a non-literal one."""
    sites: list[_Site] = []
    non_literal: int | None = None
    for node in tree.body:
        value = _assigned_value(node, name)
        if value is None:
            continue
        try:
            literal = ast.literal_eval(value)
        except ValueError:
            literal = None
        if not isinstance(literal, _LITERAL_TYPES):
            non_literal = node.lineno
            continue
        start = _offset(source, starts, value.lineno, value.col_offset)
        end = _offset(source, starts, value.end_lineno or value.lineno, value.end_col_offset or 0)
        sites.append(_Site(start, end, literal, "python"))
    return sites, non_literal


def _assigned_value(node: ast.stmt, name: str) -> ast.expr | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return node.value if isinstance(target, ast.Name) and target.id == name else None
    if isinstance(node, ast.AnnAssign) and node.value is not None:
        return node.value if isinstance(node.target, ast.Name) and node.target.id == name else None
    return None


def _define_pattern(name: str) -> re.Pattern[str]:
    # The value stops at whitespace, a backslash or a quote so that `"#define X 4\n"` reads 4.
    return re.compile(rf"^([ \t]*#[ \t]*define[ \t]+{re.escape(name)}[ \t]+)([^\s\\\"']+)", re.MULTILINE)


def _define_sites(tree: ast.Module, source: str, starts: list[int], name: str) -> list[_Site]:
    """`#define NAME value` lines inside a string literal of a module-level statement.

    A define counts when it starts a physical line or the literal's contents, so a
    one-line literal such as EXTRA = "#define VEC 4" is found as well as a block.
    """
    pattern = _define_pattern(name)
    sites: list[_Site] = []
    for lo, hi in _string_spans(tree, source, starts):
        content = _content_start(source, lo)
        for match in pattern.finditer(source[content:hi]):
            start, end = (content + offset for offset in match.span(2))
            sites.append(_Site(start, end, _parse_define_value(match.group(2)), "define"))
    return sites


def _content_start(source: str, literal_start: int) -> int:
    """Skip a string literal's prefix (r, b, u...) and its opening quotes."""
    index = literal_start
    while source[index] not in "\"'":
        index += 1
    quote = source[index]
    return index + (3 if source.startswith(quote * 3, index) else 1)


def _string_spans(tree: ast.Module, source: str, starts: list[int]) -> list[tuple[int, int]]:
    """Source spans of plain string literals outside function and class bodies and the module docstring."""
    spans: list[tuple[int, int]] = []
    for index, statement in enumerate(tree.body):
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or (
            index == 0 and _is_docstring(statement)
        ):
            continue
        in_fstring = {id(n) for f in ast.walk(statement) if isinstance(f, ast.JoinedStr) for n in ast.walk(f)}
        for node in ast.walk(statement):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.end_lineno is not None
                and id(node) not in in_fstring
            ):
                start = _offset(source, starts, node.lineno, node.col_offset)
                spans.append((start, _offset(source, starts, node.end_lineno, node.end_col_offset or 0)))
    return spans


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _parse_define_value(token: str) -> Value:
    """Numbers read as numbers (so they compare with TUNABLES), anything else stays text."""
    try:
        value = ast.literal_eval(token)
    except (ValueError, SyntaxError):
        return token
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else token


def _same(old: Value, new: Value) -> bool:
    return type(old) is type(new) and old == new


def _format(name: str, value: Value, kind: str) -> str:
    """The text that spells `value` at a site of the given kind."""
    if not isinstance(value, _LITERAL_TYPES):
        raise TunableError(f"tunable {name}: value {value!r} is not an int, float, bool or str literal")
    if kind == "python":
        return repr(value)
    if isinstance(value, bool):
        return "1" if value else "0"
    text = repr(value) if isinstance(value, float) else str(value)
    if not text or re.search(r"[\s\\\"']", text):
        raise TunableError(f"tunable {name}: {value!r} cannot be written as a single #define token")
    return text
