"""Profiles for ScriptedServer: each plays one kind of real endpoint as its documentation describes it.

Why profiles: the loop must work against what real endpoints do, not against a server that takes anything.
Each profile says what the endpoint refuses (and with which HTTP 400 body), where a reasoning model's thought
goes (a separate field, or inline in the content in one of the known forms) and how usage counts it.

What each profile is modelled on (the vendors' pages as read when this was written; no live endpoint is
called by the tests):
- openai-reasoning: OpenAI's o-series and gpt-5 models: `max_tokens` refused ("Unsupported parameter ...
  Use 'max_completion_tokens' instead.", param max_tokens, code unsupported_parameter), a temperature other
  than 1 refused (code unsupported_value); usage.completion_tokens_details.reasoning_tokens, inside
  completion_tokens; the thought itself is never returned.
- vllm-reasoning: vLLM or SGLang with a reasoning parser: the thought in `reasoning_content` (message and
  stream deltas), the answer in `content`.
- deepseek-r1-inline / deepseek-r1-no-open: R1 served raw: `<think>...</think>` inline; the second form without
  the opening tag (R1's chat template puts `<think>` in the prompt).
- anthropic: Anthropic's OpenAI SDK compatibility: `n` must be exactly 1 (choices always one long),
  `reasoning_effort` ignored, temperature capped at 1; the thought is not returned.
- google: Gemini's OpenAI compatibility: `reasoning_effort` accepted; thought summaries inline as
  `<thought>...</thought>`; thinking tokens reported in completion_tokens_details.reasoning_tokens and counted in
  total_tokens on top of completion_tokens; error bodies as a one-element JSON list.
- ollama: Ollama's /v1: any API key accepted, `n` ignored (one choice), the thought in `reasoning`.
- kimi: Kimi thinking models inline `◁think▷...◁/think▷`; gpt-oss: the harmony channels served raw.
- rate-limited: 429 with Retry-After on the first request; context-limited: a prompt plus the reply's room over
  the model's context is refused with OpenAI's (and vLLM's) context_length_exceeded wording; stream-cut: the
  first streamed reply breaks mid-reply; ignores-stream: an older server or gateway that ignores `stream` and
  answers every request with one whole JSON body (`Content-Type: application/json`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

THOUGHT = "Let me think. A draft: ```python\ndef kernel(x):\n    return x * 0\n``` no, that is wrong; keep the rows."


@dataclass(frozen=True)
class Refusal:
    status: int
    payload: Any
    headers: dict[str, str] = field(default_factory=dict)


def openai_error(message: str, param: str | None = None, code: str | None = None, kind: str = "") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind or "invalid_request_error", "param": param, "code": code}}


@dataclass
class Profile:
    """One endpoint's behaviour. `reasoning` is where the thought goes: '' (not returned), a field name
    (reasoning_content, reasoning), or an inline form (think, think-no-open, thought, kimi, harmony)."""

    name: str
    model: str
    reasoning: str = ""
    refuse_max_tokens: bool = False
    only_default_temperature: bool = False
    single_choice: str = ""  # "refuse": n != 1 is a 400; "ignore": one choice whatever n says
    reasoning_tokens: str = ""  # "inside" or "outside" completion_tokens; '' none reported
    errors_as_list: bool = False
    rate_limit_first: bool = False
    context_tokens: int = 0  # a prompt (4 characters a token) plus the reply's room over this is refused
    cut_first_stream: bool = False
    ignores_stream: str = ""  # a Content-Type: a streamed request is answered whole, served as this type
    _served: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def refusal(self, body: dict[str, Any], headers: Any) -> Refusal | None:
        """The 400 (or 429) this endpoint answers `body` with, else None."""
        with self._lock:
            first = self._served == 0
            self._served += 1
        if self.rate_limit_first and first:
            error = openai_error("Rate limit reached; try again in 1s.", code="rate_limit_exceeded", kind="requests")
            return Refusal(429, error, {"Retry-After": "1"})
        if self.refuse_max_tokens and "max_tokens" in body:
            message = (
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead."
            )
            return self._bad(openai_error(message, "max_tokens", "unsupported_parameter"))
        temperature = body.get("temperature")
        if self.only_default_temperature and temperature is not None and temperature != 1:
            message = (
                f"Unsupported value: 'temperature' does not support {temperature} with this model. "
                "Only the default (1) value is supported."
            )
            return self._bad(openai_error(message, "temperature", "unsupported_value"))
        if self.single_choice == "refuse" and int(body.get("n") or 1) != 1:
            return self._bad(openai_error("n: only n=1 is supported", "n", "invalid_request_error"))
        prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
        reply = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        if self.context_tokens and prompt + reply > self.context_tokens:
            message = (
                f"This model's maximum context length is {self.context_tokens} tokens. However, you requested "
                f"{prompt + reply} tokens ({prompt} in the messages, {reply} in the completion). "
                "Please reduce the length of the messages or completion."
            )
            return self._bad(openai_error(message, "messages", "context_length_exceeded"))
        return None

    def _bad(self, payload: dict[str, Any]) -> Refusal:
        return Refusal(400, [payload] if self.errors_as_list else payload)

    def message(self, answer: str) -> dict[str, str]:
        """The assistant message for one scripted answer, with this endpoint's thought in its place."""
        forms = {
            "think": f"<think>\n{THOUGHT}\n</think>\n\n{answer}",
            "think-no-open": f"{THOUGHT}\n</think>\n\n{answer}",
            "thought": f"<thought>{THOUGHT}</thought>{answer}",
            "kimi": f"◁think▷{THOUGHT}◁/think▷{answer}",
            "harmony": (
                f"<|channel|>analysis<|message|>{THOUGHT}<|end|><|start|>assistant<|channel|>final<|message|>{answer}"
            ),
        }
        if self.reasoning in forms:
            return {"role": "assistant", "content": forms[self.reasoning]}
        if self.reasoning:
            return {"role": "assistant", "content": answer, self.reasoning: THOUGHT}
        return {"role": "assistant", "content": answer}

    def usage(self, prompt_tokens: int, completion_tokens: int, messages: list[dict[str, str]]) -> dict[str, Any]:
        thought = 0
        if self.reasoning_tokens:
            thought = 40 * len(messages)  # a hidden thought's tokens (OpenAI returns none of its text)
        elif self.reasoning and self.reasoning not in ("think", "think-no-open", "thought", "kimi", "harmony"):
            thought = sum(len(m.get(self.reasoning, "")) // 4 for m in messages)
        inside = self.reasoning_tokens != "outside"
        completion = completion_tokens + (thought if inside else 0)
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion + (0 if inside else thought),
        }
        if self.reasoning_tokens:
            usage["completion_tokens_details"] = {"reasoning_tokens": thought}
        return usage

    def cut(self) -> bool:
        """Whether to cut this streamed reply (the first one, once)."""
        with self._lock:
            if self.cut_first_stream:
                self.cut_first_stream = False
                return True
        return False


def profiles() -> dict[str, Profile]:
    """Every profile, fresh (they count requests), by name."""
    found = [
        Profile(
            "openai-reasoning",
            "gpt-5",
            refuse_max_tokens=True,
            only_default_temperature=True,
            reasoning_tokens="inside",
        ),
        Profile("openai-unknown-reasoner", "my-reasoner-2027", refuse_max_tokens=True, only_default_temperature=True),
        Profile("vllm-reasoning", "Qwen/Qwen3-8B", reasoning="reasoning_content"),
        Profile("deepseek-r1-inline", "deepseek-r1", reasoning="think"),
        Profile("deepseek-r1-no-open", "deepseek-r1-distill-qwen-7b", reasoning="think-no-open"),
        Profile("anthropic", "claude-sonnet-4-5", single_choice="refuse"),
        Profile("google", "gemini-2.5-flash", reasoning="thought", reasoning_tokens="outside", errors_as_list=True),
        Profile("ollama", "qwen3:0.6b", reasoning="reasoning", single_choice="ignore"),
        Profile("kimi", "kimi-k1.5", reasoning="kimi"),
        Profile("gpt-oss", "gpt-oss-20b", reasoning="harmony"),
        Profile("rate-limited", "gpt-4o-mini", rate_limit_first=True),
        Profile("context-limited", "small-context", context_tokens=2000),
        Profile("stream-cut", "gpt-4o-mini", cut_first_stream=True),
        Profile("ignores-stream", "llama-3.1-8b-instruct", ignores_stream="application/json"),
    ]
    return {p.name: p for p in found}
