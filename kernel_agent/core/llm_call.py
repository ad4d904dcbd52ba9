"""One chat-completions exchange as a record: what the propose stage made and the database stores."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class LLMCall:
    """One chat-completions request and its outcome (stored in `llm_calls`)."""

    prompt_hash: str
    model: str
    base_url: str
    request: dict[str, Any]  # the messages and parameters sent
    response_texts: list[str]  # one per choice; empty on error
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    error: str | None = None
    cached: bool = False  # served from the response cache: nothing was paid
    attempts: int = 1
    reasoning_texts: list[str] = field(default_factory=list)  # one per choice: the thought, never parsed (capped)
    reasoning_tokens: int = 0  # part of completion_tokens as most endpoints count them; billed as output
    notes: list[str] = field(default_factory=list)  # what happened on the way: a cut stream, a shrunk history
    lessons: list[str] = field(default_factory=list)  # what this exchange learned about the endpoint (told once)
    endpoint_rules: dict[str, Any] | None = None  # the endpoint's rules after a lesson (stored with the run)
    templates: dict[str, str] = field(default_factory=dict)  # prompt template name -> sha256 of its source
