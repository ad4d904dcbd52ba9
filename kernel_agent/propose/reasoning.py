"""Split a reasoning model's chain of thought from its answer, so only the answer is read for code.

Why: reasoning models think in text that often holds draft code ("maybe `def kernel(x): ...`?"). Parsed
as a candidate, a draft would be evaluated, stored and fed back as the model's proposal. Servers hand the
thought over in one of two ways: a separate field (`reasoning_content` from vLLM/SGLang reasoning parsers
and DeepSeek's API, `reasoning` from Ollama and newer vLLM), or inline in the content in one of the forms
in FORMS below. `split` takes the inline forms out; the separate field never reaches the parser at all.

The thought is kept (stored with the call, capped at REASONING_CAP characters per reply), never parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

REASONING_CAP = 32_000  # characters kept per reply: a 20k-token chain of thought is ~80 kB, and nothing reads it


@dataclass(frozen=True)
class Form:
    """One inline way of marking the thought: its opening and closing markers."""

    name: str
    opening: str
    closing: str


FORMS = (
    Form("think", "<think>", "</think>"),  # DeepSeek R1, Qwen3, QwQ and most open reasoning models
    Form("kimi", "◁think▷", "◁/think▷"),  # Kimi (Moonshot) k1.5 / VL thinking models
    Form("thought", "<thought>", "</thought>"),  # Gemini's thought summaries in its OpenAI-compatible content
)
# gpt-oss (harmony format) served raw: `<|channel|>analysis<|message|>...<|end|>` then the final channel.
_HARMONY_FINAL = re.compile(r"<\|channel\|>\s*final\s*<\|message\|>")
_HARMONY_ANALYSIS = re.compile(r"<\|channel\|>\s*(analysis|commentary)[^<]*<\|message\|>(.*?)(?:<\|end\|>|$)", re.S)
_HARMONY_TOKENS = re.compile(r"<\|(start|end|return|call|channel|message|constrain)\|>")


@dataclass(frozen=True)
class Split:
    """A reply's answer (what the parser reads) and its thought (kept, never parsed); `form` names how the
    thought was marked ('' when there was none)."""

    answer: str
    reasoning: str = ""
    form: str = ""


def split(text: str) -> Split:
    """The answer and the thought of one reply's content, whichever known inline form it uses. Never raises."""
    if not isinstance(text, str) or not text:
        return Split("" if not isinstance(text, str) else text)
    if "<|channel|>" in text:
        return _harmony(text)
    for form in FORMS:
        found = _marked(text, form)
        if found is not None:
            return found
    return Split(text)


def _marked(text: str, form: Form) -> Split | None:
    """Every `opening...closing` span is thought. A closing marker with no opening before it (DeepSeek R1's
    template opens the tag in the prompt) makes everything before it thought; an opening never closed (a reply
    cut off while thinking) makes everything after it thought."""
    if form.opening not in text and form.closing not in text:
        return None
    thoughts: list[str] = []
    head, closing, tail = text.partition(form.closing)
    if closing and form.opening not in head:  # R1 without the opening tag
        thoughts.append(head)
        text = tail
    answer: list[str] = []
    while text:
        before, opening, rest = text.partition(form.opening)
        answer.append(before)
        if not opening:
            break
        inside, closing, text = rest.partition(form.closing)
        thoughts.append(inside)
        if not closing:  # cut off mid-thought: no answer after it
            break
    return Split("".join(answer).strip("\n") + "\n" if "".join(answer).strip() else "", _join(thoughts), form.name)


def _harmony(text: str) -> Split:
    """gpt-oss's raw channels: analysis (and commentary) are thought, the final channel is the answer."""
    thoughts = [m.group(2) for m in _HARMONY_ANALYSIS.finditer(text)]
    final = _HARMONY_FINAL.split(text, maxsplit=1)
    answer = final[1] if len(final) == 2 else ""
    answer = _HARMONY_TOKENS.split(answer, maxsplit=1)[0]
    return Split(answer, _join(thoughts), "harmony")


def _join(parts: list[str]) -> str:
    return "\n\n".join(p.strip() for p in parts if p.strip())


def capped(reasoning: str, limit: int = REASONING_CAP) -> str:
    """The thought as stored: at most `limit` characters, the cut said in the text (head and tail kept: the
    plan is at the start, the conclusion at the end)."""
    if len(reasoning) <= limit:
        return reasoning
    half = limit // 2
    cut = len(reasoning) - 2 * half
    return f"{reasoning[:half]}\n[... {cut} characters of reasoning not stored ...]\n{reasoning[-half:]}"
