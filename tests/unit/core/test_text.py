"""The one sanitizer every candidate-derived string passes: what it removes, what it keeps, what it refuses."""

from __future__ import annotations

from kernel_agent.core.text import clean, clean_nested, has_raw_controls, storable

ESC = "\x1b"


def test_terminal_escapes_go_and_markup_like_brackets_stay() -> None:
    """Rich markup is the renderer's job (markup off); brackets are legitimate text, as in `pip
    install 'kernel-agent[cluster]'`."""
    assert (
        clean(f"{ESC}[1;31mred{ESC}[0m {ESC}]8;;http://x{ESC}\\link{ESC}]8;;{ESC}\\ [bold]x[/bold]")
        == "red link [bold]x[/bold]"
    )
    assert clean(f"a{ESC}Mb\x9b2Jc") == "abc"  # a two-character escape and an 8-bit CSI


def test_one_line_by_default_and_lines_kept_on_request() -> None:
    assert clean("one\n\ntwo\tthree\r\nfour\u2028five") == "one two three four five"
    assert clean("a\r\nb\rc\td\x07e", keep_newlines=True) == "a\nb\nc    de"


def test_bidi_overrides_and_invalid_unicode_cannot_reach_a_terminal_or_a_database() -> None:
    assert clean("admin\u202e\u2066txt.exe") == "admin txt.exe"
    assert clean("lone \ud800 surrogate") == "lone \ufffd surrogate"
    assert clean(b"\xff\xfe bytes") == "\ufffd\ufffd bytes"
    assert clean(12.5) == "12.5"  # not a string: its str()


def test_the_limit_counts_what_is_left_and_marks_the_cut() -> None:
    assert clean("x" * 50, limit=10) == "x" * 9 + "…"
    assert clean(f"{ESC}[31m" * 100 + "ok", limit=10) == "ok"  # escapes removed before the length is judged
    assert len(clean("y" * 10_000_000, limit=100)) == 100  # a flood is cut before the regexes see it


def test_code_with_raw_controls_is_refused_and_escapes_written_as_text_are_not() -> None:
    assert has_raw_controls("s = '\\x1b[31m'\n\tif s:\r\n\f    pass\n") is None
    assert "U+001B" in has_raw_controls(f"s = '{ESC}[31m'\n")
    assert "U+000B" in has_raw_controls("x = 1\x0b\n")  # a vertical tab: str.splitlines() would split code there
    assert "U+2067" in has_raw_controls("# \u2067 Trojan Source\n")
    assert "lone surrogate" in has_raw_controls("x = '\udfff'\n")


def test_clean_nested_works_in_place_and_cleans_keys() -> None:
    """Verdict timing and check dicts are shared with their callers: cleaning must not replace them."""
    inner = [f"{ESC}[2Jwiped", 3, None]
    data = {f"key{ESC}[0m": inner, "ok": {"deep": "a\nb"}}
    assert clean_nested(data) is data
    assert data == {"key": ["wiped", 3, None], "ok": {"deep": "a b"}}
    assert data["key"] is inner


def test_storable_replaces_only_what_a_database_refuses() -> None:
    assert storable("nul\x00 and \ud800 but \x1b kept") == "nul\ufffd and \ufffd but \x1b kept"
