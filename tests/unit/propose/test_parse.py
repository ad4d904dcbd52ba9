"""The reply parser on replies shaped like real ones: which block becomes the candidate, and the
one-line reason when none does."""

from __future__ import annotations

from kernel_agent.propose.parse import extract_candidate, fenced_blocks, summary_line

MODULE = "import torch\n\n\ndef kernel(x):\n    return torch.softmax(x, -1)\n"


def test_a_usage_snippet_after_the_module_is_not_the_candidate() -> None:
    reply = (
        f"Plan: fuse the max and the sum.\n\n```python\n{MODULE}```\n\nUse it like this:\n\n```python\n"
        "y = kernel(torch.randn(4, 8))\n```\n"
    )
    assert extract_candidate(reply, "kernel") == (MODULE, None)


def test_of_a_draft_and_its_correction_the_last_module_wins() -> None:
    draft = MODULE.replace("softmax(x, -1)", "softmax(x, 0)")
    reply = f"First try:\n```python\n{draft}```\nThat normalizes the wrong axis; fixed:\n```python\n{MODULE}```\n"
    assert extract_candidate(reply, "kernel") == (MODULE, None)


def test_a_longer_fence_holds_a_triple_backtick_docstring_and_tildes_work_too() -> None:
    inner = '"""Example:\n```\nkernel(x)\n```\n"""\n' + MODULE
    assert extract_candidate(f"````python\n{inner}````\n", "kernel") == (inner, None)
    assert extract_candidate(f"~~~py\n{MODULE}~~~\n", "kernel") == (MODULE, None)


def test_a_bare_module_without_fences_is_accepted_and_an_annotated_entry_point_counts() -> None:
    assert extract_candidate(MODULE.rstrip("\n"), "kernel") == (MODULE, None)
    annotated = "import torch\nfrom typing import Callable\n\nkernel: Callable = torch.relu\n"
    assert extract_candidate(f"```python\n{annotated}```", "kernel") == (annotated, None)


def test_the_reason_comes_from_the_block_meant_as_the_module() -> None:
    """Two broken blocks: the one that mentions the entry point explains the failure, not the helper."""
    reply = "```python\ndef kernel(x)\n    return x\n```\n```python\nimport numpy as\n```\n"
    source, reason = extract_candidate(reply, "kernel")
    assert source is None and reason == "code does not parse: SyntaxError: expected ':' (line 1)"


def test_replies_without_python_give_one_line_reasons() -> None:
    assert extract_candidate("```cpp\nint x;\n```\n```cuda\n__global__ void k() {}\n```", "kernel") == (
        None,
        "no ```python code block in the reply (only: cpp, cuda)",
    )
    assert extract_candidate("I would unroll the loop.", "kernel") == (None, "no fenced code block in the reply")
    assert extract_candidate("   \n", "kernel") == (None, "empty reply")
    _, reason = extract_candidate("```python\n" + "def kernel(x):\n    return (x\n" * 50, "kernel")
    assert "never closed" in reason and "\n" not in reason and len(reason) <= 300


def test_code_is_kept_byte_for_byte_and_crlf_replies_lose_only_their_carriage_returns() -> None:
    """Lines split at \\n only: a form feed or U+2028 inside the code is the code's, not a line break to rewrite."""
    odd = "import torch\n\x0c\ndef kernel(x):  # \u2028 kept\n    return x\n"
    assert extract_candidate(f"```python\n{odd}```", "kernel") == (odd, None)
    assert extract_candidate(f"```python\r\n{MODULE.replace(chr(10), chr(13) + chr(10))}```\r\n", "kernel") == (
        MODULE,
        None,
    )
    assert [b.closed for b in fenced_blocks("```python\nx = 1\n```\n```python\ny = 2\n")] == [True, False]


def test_summary_line_is_the_first_line_of_prose_outside_code() -> None:
    assert (
        summary_line(f"```python\n{MODULE}```\n\n## Plan: fuse the max and the sum\nmore")
        == "Plan: fuse the max and the sum"
    )
    assert summary_line(f"```python\n{MODULE}```") == ""
    assert summary_line("- \x1b[31mone\x1b[0m line") == "one line"
