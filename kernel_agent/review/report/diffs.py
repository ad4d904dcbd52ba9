"""Side-by-side diffs with syntax highlighting, as inline-styled HTML (no stylesheet, no classes).

Why hand-rolled rather than difflib.HtmlDiff: HtmlDiff cannot highlight syntax,
and pygments' HtmlFormatter lets spans cross lines (docstrings), which breaks a
line-by-line table; tokens are split on newlines here instead.
"""

from __future__ import annotations

import difflib
import html

from pygments.lexers import PythonLexer
from pygments.styles import get_style_by_name

STYLE = get_style_by_name("default")
COLORS = {"equal": "", "delete": "#ffebe9", "insert": "#e6ffec", "replace": "#fff8c5"}


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


def highlight_lines(text: str) -> list[str]:
    """One HTML fragment per source line, every token in a span with an inline style."""
    lines: list[str] = [""]
    for token_type, value in PythonLexer(stripnl=False, ensurenl=False).get_tokens(text):
        style = _style(token_type)
        for index, piece in enumerate(value.split("\n")):
            if index:
                lines.append("")
            if piece:
                escaped = html.escape(piece)
                lines[-1] += f'<span style="{style}">{escaped}</span>' if style else escaped
    if text.endswith("\n") and lines and lines[-1] == "":
        lines.pop()
    return lines


def _cell(number: int | None, fragment: str, kind: str) -> str:
    background = f"background:{COLORS[kind]};" if kind != "equal" and number is not None else ""
    no = "" if number is None else str(number)
    return (
        f'<td style="color:#888;text-align:right;padding:0 6px;user-select:none;{background}">{no}</td>'
        f'<td style="white-space:pre-wrap;word-break:break-all;{background}">{fragment}</td>'
    )


def side_by_side(old: str, new: str, old_label: str, new_label: str, context: int = 3) -> str:
    """An HTML table: old on the left, new on the right, changed lines tinted, long unchanged runs folded."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    old_html, new_html = highlight_lines(old), highlight_lines(new)
    old_html += [""] * (len(old_lines) - len(old_html))
    new_html += [""] * (len(new_lines) - len(new_html))
    rows: list[str] = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        if rows:
            rows.append(
                '<tr><td colspan="4" style="background:#f0f3f6;color:#57606a;text-align:center">&#8942;</td></tr>'
            )
        for tag, i1, i2, j1, j2 in group:
            for offset in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + offset, j1 + offset
                left = _cell(i + 1, old_html[i], tag) if i < i2 else _cell(None, "", tag)
                right = _cell(j + 1, new_html[j], tag) if j < j2 else _cell(None, "", tag)
                rows.append(f"<tr>{left}{right}</tr>")
    if not rows:
        rows.append('<tr><td colspan="4" style="text-align:center;color:#57606a">no differences</td></tr>')
    head = (
        f'<tr><th colspan="2" style="text-align:left">{html.escape(old_label)}</th>'
        f'<th colspan="2" style="text-align:left">{html.escape(new_label)}</th></tr>'
    )
    return (
        '<table class="diff" '
        'style="border-collapse:collapse;width:100%;table-layout:fixed;font-family:monospace;font-size:12px">'
        '<colgroup><col style="width:3.5em"><col><col style="width:3.5em"><col></colgroup>'
        f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
    )
