"""Side-by-side and unified diffs with syntax highlighting, as HTML fragments per line.

Why hand-rolled rather than difflib.HtmlDiff: HtmlDiff cannot highlight syntax,
and pygments' HtmlFormatter lets spans cross lines (docstrings), which breaks a
line-by-line table; tokens are split on newlines here instead. Two renderings of
one token stream: inline styles for the self-contained report (no stylesheet),
class names for the review page (whose CSP allows no inline style). Every token is
escaped, and a character that changes the display order is shown as its code point.
"""

from __future__ import annotations

import difflib
import html
from dataclasses import dataclass

from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer
from pygments.styles import get_style_by_name
from pygments.token import STANDARD_TYPES

from kernel_agent.core.text import DIRECTION

STYLE = get_style_by_name("default")
COLORS = {"equal": "", "delete": "#ffebe9", "insert": "#e6ffec", "replace": "#fff8c5"}


@dataclass(frozen=True)
class Row:
    """One row of a side-by-side diff; `kind` is equal, delete, insert, replace, or fold (a run of unchanged lines
    left out). A side without a line has number None."""

    kind: str
    old_no: int | None = None
    old_html: str = ""
    new_no: int | None = None
    new_html: str = ""


@dataclass(frozen=True)
class Line:
    """One line of a unified diff: `sign` is ' ', '-', '+', or '' for a fold."""

    sign: str
    old_no: int | None
    new_no: int | None
    html: str


def _style(token_type) -> str:  # noqa: ANN001 - a pygments token type
    info = STYLE.style_for_token(token_type)
    parts = []
    if info.get("color"):
        parts.append(f"color:#{info['color']}")
    if info.get("bold"):
        parts.append("font-weight:bold")
    if info.get("italic"):
        parts.append("font-style:italic")
    return ";".join(parts)


def _class(token_type) -> str:  # noqa: ANN001 - a pygments token type
    while token_type not in STANDARD_TYPES:
        token_type = token_type.parent
    return STANDARD_TYPES[token_type]


def _escape(piece: str, classes: bool) -> str:
    """HTML-escaped text with each direction-changing character replaced by a visible marker."""
    escaped = html.escape(piece)
    if not DIRECTION.search(escaped):
        return escaped
    look = 'class="bidi"' if classes else 'style="background:#ff8182;color:#fff"'
    marker = f"<span {look}>[U+{{:04X}}]</span>"
    return DIRECTION.sub(lambda m: marker.format(ord(m.group())), escaped)


def highlight_lines(text: str, classes: bool = False) -> list[str]:
    """One HTML fragment per source line, every token in a span (an inline style, or pygments' short class name)."""
    lines: list[str] = [""]
    for token_type, value in PythonLexer(stripnl=False, ensurenl=False).get_tokens(text):
        attr = f'class="{_class(token_type)}"' if classes else f'style="{_style(token_type)}"'
        plain = not _class(token_type) if classes else not _style(token_type)
        for index, piece in enumerate(value.split("\n")):
            if index:
                lines.append("")
            if piece:
                escaped = _escape(piece, classes)
                lines[-1] += escaped if plain else f"<span {attr}>{escaped}</span>"
    if text.endswith("\n") and lines and lines[-1] == "":
        lines.pop()
    return lines


def pygments_css(scope: str) -> str:
    """The stylesheet for `highlight_lines(classes=True)` under the CSS selector `scope`."""
    return HtmlFormatter(style=STYLE).get_style_defs(scope)


def _highlighted(old: str, new: str, classes: bool) -> tuple[list[str], list[str], list[str], list[str]]:
    old_lines, new_lines = old.splitlines(), new.splitlines()
    old_html, new_html = highlight_lines(old, classes), highlight_lines(new, classes)
    old_html += [""] * (len(old_lines) - len(old_html))
    new_html += [""] * (len(new_lines) - len(new_html))
    return old_lines, new_lines, old_html, new_html


def rows(old: str, new: str, context: int = 3, classes: bool = False) -> list[Row]:
    """The side-by-side rows: old on the left, new on the right, long unchanged runs folded."""
    old_lines, new_lines, old_html, new_html = _highlighted(old, new, classes)
    found: list[Row] = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        if found:
            found.append(Row("fold"))
        for tag, i1, i2, j1, j2 in group:
            for offset in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + offset, j1 + offset
                found.append(
                    Row(
                        tag,
                        i + 1 if i < i2 else None,
                        old_html[i] if i < i2 else "",
                        j + 1 if j < j2 else None,
                        new_html[j] if j < j2 else "",
                    )
                )
    return found


def unified(old: str, new: str, context: int = 3, classes: bool = False) -> list[Line]:
    """The unified lines: removed lines, then added ones, per change; long unchanged runs folded."""
    old_lines, new_lines, old_html, new_html = _highlighted(old, new, classes)
    found: list[Line] = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        if found:
            found.append(Line("", None, None, ""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                found += [Line(" ", i + 1, j1 + (i - i1) + 1, old_html[i]) for i in range(i1, i2)]
                continue
            found += [Line("-", i + 1, None, old_html[i]) for i in range(i1, i2)]
            found += [Line("+", None, j + 1, new_html[j]) for j in range(j1, j2)]
    return found


def _cell(number: int | None, fragment: str, kind: str) -> str:
    background = f"background:{COLORS[kind]};" if kind != "equal" and number is not None else ""
    no = "" if number is None else str(number)
    return (
        f'<td style="color:#888;text-align:right;padding:0 6px;user-select:none;{background}">{no}</td>'
        f'<td style="white-space:pre-wrap;word-break:break-all;{background}">{fragment}</td>'
    )


def side_by_side(old: str, new: str, old_label: str, new_label: str, context: int = 3) -> str:
    """An HTML table with inline styles (the report): old on the left, new on the right, changed lines tinted."""
    cells: list[str] = []
    for row in rows(old, new, context):
        if row.kind == "fold":
            cells.append(
                '<tr><td colspan="4" style="background:#f0f3f6;color:#57606a;text-align:center">&#8942;</td></tr>'
            )
        else:
            left, right = _cell(row.old_no, row.old_html, row.kind), _cell(row.new_no, row.new_html, row.kind)
            cells.append(f"<tr>{left}{right}</tr>")
    if not cells:
        cells.append('<tr><td colspan="4" style="text-align:center;color:#57606a">no differences</td></tr>')
    head = (
        f'<tr><th colspan="2" style="text-align:left">{html.escape(old_label)}</th>'
        f'<th colspan="2" style="text-align:left">{html.escape(new_label)}</th></tr>'
    )
    return (
        '<table class="diff" '
        'style="border-collapse:collapse;width:100%;table-layout:fixed;font-family:monospace;font-size:12px">'
        '<colgroup><col style="width:3.5em"><col><col style="width:3.5em"><col></colgroup>'
        f"<thead>{head}</thead><tbody>{''.join(cells)}</tbody></table>"
    )
