"""One sanitizer for every string that comes from a candidate (THREATS.md row 30, class E).

Candidate-derived text (worker replies, exception messages, kernel output, compiler
diagnostics, LLM replies) crosses into the trusted side here, once, before anything
shows or stores it: terminal escape sequences and other control characters are
removed, invalid Unicode (lone surrogates, undecodable bytes) becomes U+FFFD, and the
length is capped. Rich markup is not stripped here (square brackets are legitimate
text); every renderer prints data with markup off.
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), and two-character ESC sequences.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")


def clean(text: object, limit: int = 1000, keep_newlines: bool = False) -> str:
    """`text` made safe to print and store: no control characters, valid Unicode, at most `limit` characters.

    Without `keep_newlines` all whitespace runs collapse to one space (a one-line reason)."""
    if isinstance(text, bytes):
        value = text.decode("utf-8", errors="replace")
    else:
        value = text if isinstance(text, str) else str(text)
    value = value[: limit * 4 + 4096]  # bounds the work on a flood; escapes removed below may shorten it
    value = _SURROGATES.sub("\ufffd", value)  # lone surrogates cannot be encoded (print, SQLite, UTF-8 files)
    value = _ESCAPES.sub("", value)
    if keep_newlines:
        value = value.replace("\r\n", "\n").replace("\r", "\n")
        value = _CONTROLS.sub("", value.replace("\t", "    "))
    else:
        value = " ".join(_CONTROLS.sub(" ", value).split())
    if len(value) > limit:
        value = value[: max(0, limit - 1)] + "…"
    return value


def has_raw_controls(source: str) -> str | None:
    """Why `source` (code to be stored and shown verbatim) is unfit, or None: raw control
    characters or lone surrogates. Code is never rewritten, so it is refused instead."""
    try:
        source.encode("utf-8")
    except UnicodeEncodeError:
        return "the source holds invalid Unicode (a lone surrogate)"
    match = re.search(r"[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", source)
    if match:
        return (
            "the source holds a raw control character "
            f"(U+{ord(match.group()):04X}); write it as an escape in a string literal"
        )
    return None


def clean_nested(value: object, limit: int = 1000) -> object:
    """Every string inside `value` (dicts and lists, as verdicts hold them) `clean`ed in place, so
    references others hold stay valid; a string is returned cleaned. Keys are cleaned too."""
    if isinstance(value, str):
        return clean(value, limit)
    if isinstance(value, dict):
        for key in list(value):
            if isinstance(key, str) and clean(key, 200) != key:
                value[clean(key, 200)] = clean_nested(value.pop(key), limit)
            else:
                value[key] = clean_nested(value[key], limit)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            value[index] = clean_nested(item, limit)
    return value


# Characters that change the order text is displayed in (Trojan Source, CVE-2021-42574): a diff holding one can
# read differently from what runs. `has_raw_controls` refuses the overrides in new sources; older rows and the
# marks it lets through (LRM, RLM, ALM) are still shown, so every page that shows code names them.
DIRECTION = re.compile(r"[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def direction_controls(text: str) -> list[str]:
    """The direction-changing characters in `text` as code points (`U+202E`), each once, in order of appearance."""
    return list(dict.fromkeys(f"U+{ord(ch):04X}" for ch in DIRECTION.findall(text)))


_UNSTORABLE = re.compile(r"[\ud800-\udfff\x00]")


def storable(text: str) -> str:
    """`text` with lone surrogates (SQLite cannot encode them) and NUL (PostgreSQL refuses it in text)
    replaced by U+FFFD, nothing else changed: what every database can store."""
    return _UNSTORABLE.sub("\ufffd", text)
