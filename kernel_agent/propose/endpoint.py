"""What one (base URL, model) accepts in a chat-completions request, learned from the endpoint itself.

Why learn instead of list: OpenAI's reasoning models refuse `max_tokens` and any non-default `temperature`
with HTTP 400; Anthropic's compatible endpoint takes `n=1` only; a local server may refuse a parameter it
does not know. A hard-coded model list is wrong the day a vendor ships a model, so `prior` is only the first
guess and `lesson` reads each 400 that names a parameter: the request is sent again once without it (or
renamed), and the rules are kept for the run (stored with it, so `--resume` starts from them). A 400 saying
the request does not fit the model's context is answered by a smaller request (`shrink`).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

# The parameters a lesson may change, and what to do about each.
TOKEN_PARAMS = ("max_tokens", "max_completion_tokens")
DROPPABLE = ("temperature", "top_p", "reasoning_effort", "stream_options")
KNOWN = (*TOKEN_PARAMS, *DROPPABLE, "n", "stream")
# OpenAI's o-series and gpt-5 families (not gpt-5-chat): max_completion_tokens, default sampling only.
_REASONING_FAMILY = re.compile(
    r"^(?:.*/)?(?:o\d(?:-mini|-pro)?|gpt-5(?:\.\d+)?(?:-mini|-nano|-pro|-codex)?)(?:-\d.*)?$"
)
_UNSUPPORTED_PARAMETER = re.compile(r"unsupported parameter:?\s*'?`?(\w+)", re.I)
_USE_INSTEAD = re.compile(r"use\s+'?`?(\w+)'?`?\s+instead", re.I)
_UNSUPPORTED_VALUE = re.compile(r"unsupported value:?\s*'?`?(\w+)", re.I)
_REFUSAL_WORDS = re.compile(
    r"unsupported|not supported|unrecognized|unknown|not permitted|not allowed|must be|only .*supported|invalid", re.I
)
MAX_SHRINKS = 8  # context-length refusals answered by a smaller request before giving up (a 400 is cheap)
MIN_REPLY_TOKENS = 256  # the reply's room is cut down to this, never below: less is no room for a module
# OpenAI's and vLLM's wording: "maximum context length is 8192 tokens. However, you requested 9000 tokens
# (808 in the messages, 8192 in the completion)"; llama.cpp's: "Requested tokens (9000) exceed context window of 8192".
_CONTEXT_LIMIT = re.compile(r"(?:maximum context length is|context window of)\s*(\d+)", re.I)
_PROMPT_TOKENS = re.compile(r"(\d+)\s*(?:tokens)?\s*in the messages|messages resulted in\s*(\d+)", re.I)
_CONTEXT = re.compile(
    r"context[ _-]?(length|window)|maximum context|too many tokens|prompt is too long|input is too long|"
    r"exceed(s|ed)? the (model'?s )?(maximum|max)",
    re.I,
)


@dataclass(frozen=True)
class EndpointRules:
    """How to shape requests for one (base URL, model); `learned` says what changed and why, in order."""

    token_param: str = "max_tokens"
    dropped: tuple[str, ...] = ()  # parameters never sent
    single_choice: bool = False  # n=1 per request (the provider asks again for more)
    stream: bool = True  # stream the reply (off after a 400 naming `stream`, a whole reply to a stream, --no-stream)
    learned: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EndpointRules:
        token = data.get("token_param") if data.get("token_param") in TOKEN_PARAMS else "max_tokens"
        return cls(
            token_param=token,
            dropped=tuple(p for p in data.get("dropped", ()) if p in DROPPABLE),
            single_choice=bool(data.get("single_choice", False)),
            stream=bool(data.get("stream", True)),
            learned=tuple(str(line) for line in data.get("learned", ())),
        )


def prior(model: str, stream: bool = True) -> EndpointRules:
    """The first guess before the endpoint has said anything: OpenAI's reasoning families take
    max_completion_tokens and default sampling only; everything else, the classic parameters."""
    if _REASONING_FAMILY.match(model.lower()):
        return EndpointRules(token_param="max_completion_tokens", dropped=("temperature", "top_p"), stream=stream)
    return EndpointRules(stream=stream)


@dataclass(frozen=True)
class Request:
    """What the provider wants, before the endpoint's rules shape it."""

    model: str
    messages: list[dict[str, str]]
    n: int
    max_tokens: int
    temperature: float | None = None
    reasoning_effort: str | None = None


def body(request: Request, rules: EndpointRules) -> dict[str, Any]:
    """The JSON body to send under `rules`."""
    sent: dict[str, Any] = {
        "model": request.model,
        "messages": request.messages,
        "n": 1 if rules.single_choice else request.n,
        rules.token_param: request.max_tokens,
    }
    if request.temperature is not None:
        sent["temperature"] = request.temperature
    if request.reasoning_effort:
        sent["reasoning_effort"] = request.reasoning_effort
    if rules.stream:
        sent["stream"] = True
        sent["stream_options"] = {"include_usage": True}
    return {k: v for k, v in sent.items() if k not in rules.dropped}


def lesson(rules: EndpointRules, message: str, param: str | None = None) -> EndpointRules | None:
    """New rules when a 400's message (and its `param` field) names a parameter this endpoint refuses; None
    when it names none that can be changed (a 400 for another reason), or one already changed."""
    renamed = _UNSUPPORTED_PARAMETER.search(message)
    instead = _USE_INSTEAD.search(message)
    value = _UNSUPPORTED_VALUE.search(message)
    named = (renamed and renamed.group(1)) or (value and value.group(1)) or param or _only_named(message)
    if named not in KNOWN:
        return None
    if named in TOKEN_PARAMS:
        other = instead.group(1) if instead and instead.group(1) in TOKEN_PARAMS else _other_token_param(named)
        if rules.token_param != named or other == named:
            return None
        return _learn(replace(rules, token_param=other), f"sends {other} instead of {named}")
    if named == "n":
        return None if rules.single_choice else _learn(replace(rules, single_choice=True), "asks for one reply (n=1)")
    if named == "stream":
        return None if not rules.stream else _learn(replace(rules, stream=False), "does not stream")
    if named in rules.dropped:
        return None
    what = "its value" if value else "the parameter"
    return _learn(replace(rules, dropped=(*rules.dropped, named)), f"omits {named} (the endpoint refused {what})")


def unstreamed(rules: EndpointRules) -> EndpointRules | None:
    """New rules when a streamed request came back as one whole JSON body; None when already not streaming."""
    if not rules.stream:
        return None
    return _learn(replace(rules, stream=False), "does not stream (it answered a streamed request whole)")


def _only_named(message: str) -> str | None:
    """The one known parameter a refusal's message names (quoted, or as a word), else None."""
    if not _REFUSAL_WORDS.search(message):
        return None
    found = [p for p in KNOWN if re.search(rf"(?<![\w.]){re.escape(p)}(?![\w])", message)]
    return found[0] if len(found) == 1 else None


def _other_token_param(name: str) -> str:
    return TOKEN_PARAMS[1] if name == TOKEN_PARAMS[0] else TOKEN_PARAMS[0]


def _learn(rules: EndpointRules, what: str) -> EndpointRules:
    return replace(rules, learned=(*rules.learned, what))


def is_context_length(message: str, code: str | None = None) -> bool:
    """Whether a 400 says the prompt (with the reply's room) does not fit the model's context."""
    return code == "context_length_exceeded" or bool(_CONTEXT.search(message))


@dataclass(frozen=True)
class Shrunk:
    """A smaller request after a context-length refusal: the earlier attempts to show, the reply's room, and
    the note that says what changed."""

    history: list[Any]
    reply_tokens: int
    note: str


def shrink(history: list[Any], reply_tokens: int, message: str) -> Shrunk | None:
    """A smaller request after a context-length refusal; None when nothing can shrink. Where the refusal gives
    the model's context and the prompt's size and the prompt leaves room for a reply, the reply's room is cut
    to fit; else half the earlier attempts shown leave (oldest first; prompts show at most the 8 most recent);
    else the reply's room halves."""
    limit, prompt = _context_numbers(message)
    room = limit - prompt - 16 if limit and prompt is not None else 0  # 16: the chat template's own tokens
    if room >= MIN_REPLY_TOKENS and reply_tokens > room:
        note = f"prompt too long for the model's context ({limit} tokens): asked for {room} reply tokens"
        return Shrunk(history, room, note)
    if history:
        keep = min(len(history), 8) // 2
        note = f"prompt too long for the model's context: left out the {len(history) - keep} oldest attempt(s)"
        return Shrunk(history[len(history) - keep :] if keep else [], reply_tokens, note)
    if reply_tokens > MIN_REPLY_TOKENS:
        smaller = max(MIN_REPLY_TOKENS, reply_tokens // 2)
        note = f"prompt too long for the model's context: asked for at most {smaller} reply tokens"
        return Shrunk(history, smaller, note)
    return None


def _context_numbers(message: str) -> tuple[int | None, int | None]:
    """(the model's context, the prompt's tokens) where a context-length refusal says them."""
    limit = _CONTEXT_LIMIT.search(message)
    prompt = _PROMPT_TOKENS.search(message)
    return (
        int(limit.group(1)) if limit else None,
        int(prompt.group(1) or prompt.group(2)) if prompt else None,
    )
