"""The diff code both the report and the review page use: escaped tokens, direction controls shown as code points."""

from __future__ import annotations

from kernel_agent.core.text import direction_controls
from kernel_agent.review.report.diffs import highlight_lines, rows, side_by_side, unified

OLD = "def kernel(x):\n    return x\n"
NEW = 'def kernel(x):\n    s = "<script>alert(1)</script>"\n    return x  # \u202e done \u2066\n'


def test_every_token_is_escaped_in_both_renderings() -> None:
    for classes in (False, True):
        fragments = [r.new_html for r in rows(OLD, NEW, classes=classes)] + [
            line.html for line in unified(OLD, NEW, classes=classes)
        ]
        joined = "".join(fragments)
        assert "<script>" not in joined and "&lt;script&gt;" in joined
    assert "<script>" not in side_by_side(OLD, NEW, "<b>old</b>", "new") and "&lt;b&gt;old" in side_by_side(
        OLD, NEW, "<b>old</b>", "new"
    )


def test_direction_controls_are_shown_as_code_points_and_named() -> None:
    assert direction_controls(NEW) == ["U+202E", "U+2066"] and direction_controls(OLD) == []
    line = highlight_lines(NEW, classes=True)[2]
    assert "\u202e" not in line and '<span class="bidi">[U+202E]</span>' in line and "[U+2066]" in line
    assert "\u202e" not in side_by_side(OLD, NEW, "a", "b") and "[U+202E]" in side_by_side(OLD, NEW, "a", "b")


def test_class_names_replace_inline_styles_for_the_page() -> None:
    page = "".join(highlight_lines(NEW, classes=True))
    assert "style=" not in page and '<span class="k">def</span>' in page
    assert 'style="' in "".join(highlight_lines(NEW))


def test_unified_lines_number_both_sides_and_fold_long_equal_runs() -> None:
    old = "".join(f"a{i} = {i}\n" for i in range(20))
    new = old.replace("a1 = 1", "a1 = 2").replace("a18 = 18", "a18 = 0")
    lines = unified(old, new, context=1)
    signs = "".join(line.sign or "|" for line in lines)
    assert signs == " -+ | -+ "
    assert [(line.old_no, line.new_no) for line in lines if line.sign == "-"] == [(2, None), (19, None)]
    assert [r.kind for r in rows(old, new, context=1)] == [
        "equal",
        "replace",
        "equal",
        "fold",
        "equal",
        "replace",
        "equal",
    ]
