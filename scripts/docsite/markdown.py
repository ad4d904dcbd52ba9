"""Text from the code made safe for Markdown: help texts carry `<a|b>` metavars, globs and brackets that
Markdown would read as HTML tags, emphasis or links."""

from __future__ import annotations

import html
import re

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_SPECIAL = re.compile(r"([\\*_\[\]#])")


def prose(text: str) -> str:
    """Plain text as Markdown prose: code spans kept as written, everything else escaped."""
    out, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        out.append(_escape(text[last : span.start()]))
        out.append(span.group(0))
        last = span.end()
    out.append(_escape(text[last:]))
    return "".join(out)


def code(text: str) -> str:
    """Text as one inline code span, whatever backticks it holds."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _escape(text: str) -> str:
    return _SPECIAL.sub(r"\\\1", html.escape(text, quote=False))
