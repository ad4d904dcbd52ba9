"""The thought of a reasoning model is split off its answer in every known inline form, and never parsed:
a draft module inside the thought must not become the candidate."""

from __future__ import annotations

import pytest

from kernel_agent.propose import reasoning
from kernel_agent.propose.parse import extract_candidate

DRAFT = "maybe:\n```python\ndef kernel(x):\n    return x * 0\n```\nno, that zeroes the output."
ANSWER = "Fused the passes.\n```python\ndef kernel(x):\n    return x.softmax(-1)\n```\n"


@pytest.mark.parametrize(
    ("text", "form"),
    [
        (f"<think>\n{DRAFT}\n</think>\n\n{ANSWER}", "think"),
        (f"{DRAFT}\n</think>\n{ANSWER}", "think"),  # DeepSeek R1: the opening tag was in the prompt
        (f"◁think▷{DRAFT}◁/think▷{ANSWER}", "kimi"),
        (f"<thought>{DRAFT}</thought>{ANSWER}", "thought"),
        (
            f"<|channel|>analysis<|message|>{DRAFT}<|end|><|start|>assistant<|channel|>final<|message|>{ANSWER}",
            "harmony",
        ),
    ],
)
def test_each_inline_form_is_split_and_the_draft_in_the_thought_is_never_the_candidate(text: str, form: str) -> None:
    parts = reasoning.split(text)
    assert parts.form == form
    assert "return x * 0" in parts.reasoning and "return x * 0" not in parts.answer
    source, reason = extract_candidate(parts.answer, "kernel")
    assert reason is None and "softmax" in source
    # Without the split, the parser takes the last usable block; put the draft last and it would win:
    assert "x * 0" in extract_candidate(f"{ANSWER}\n{DRAFT}", "kernel")[0]


def test_a_reply_cut_off_while_thinking_has_no_answer() -> None:
    parts = reasoning.split(f"<think>{DRAFT}\nstill thinking")
    assert parts.answer == "" and "still thinking" in parts.reasoning


def test_text_without_a_thought_is_untouched() -> None:
    assert reasoning.split(ANSWER) == reasoning.Split(ANSWER)
    assert reasoning.split("") == reasoning.Split("")


def test_several_thoughts_are_all_kept_and_the_answers_between_them_joined() -> None:
    parts = reasoning.split("<think>a</think>one <think>b</think>two")
    assert parts.reasoning == "a\n\nb" and parts.answer == "one two\n"


def test_a_long_thought_is_capped_with_head_tail_and_the_cut_said() -> None:
    text = "PLAN " + "x" * 100_000 + " CONCLUSION"
    kept = reasoning.capped(text, 1000)
    assert len(kept) < 1100 and kept.startswith("PLAN") and kept.endswith("CONCLUSION")
    assert "characters of reasoning not stored" in kept
    assert reasoning.capped("short") == "short"
