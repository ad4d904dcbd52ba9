"""One chat-completions reply, read whole or as a stream: answers, thoughts, finish reasons, usage.

Why streaming: a reasoning model's reply takes minutes, and a proxy (or the client) drops a silent
connection long before that. Streamed, bytes flow all along; the deadline then covers the whole reply,
not one read (a watchdog closes the stream at the deadline), and the progress display can count tokens.
A stream that breaks before every choice finished is a `StreamCut` holding what arrived, so the caller
can record it, count its tokens once, and ask again.

Reasoning never reaches the parser: the separate field (`reasoning_content`, `reasoning`) is read apart,
and the inline forms are split off the content here (`reasoning.split`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kernel_agent.propose import reasoning
from kernel_agent.propose.prices import Usage

REASONING_FIELDS = ("reasoning_content", "reasoning")
PROGRESS_EVERY_S = 0.5


@dataclass
class Reply:
    """What came back: per choice, the answer (parsed for code), the thought (kept apart) and why it ended."""

    answers: list[str] = field(default_factory=list)
    thoughts: list[str] = field(default_factory=list)
    finish_reasons: list[str | None] = field(default_factory=list)
    usage: Usage | None = None  # None: the endpoint reported none (tokens are then estimated)
    chunks: int = 0  # content and reasoning deltas received (about one token each)
    unstreamed: bool = False  # a streamed request answered by one whole JSON body: the endpoint ignores `stream`

    @property
    def estimated_tokens(self) -> int:
        """Output tokens when no usage came: one per streamed delta, else about 4 characters per token."""
        if self.chunks:
            return self.chunks
        return sum(len(t) for t in (*self.answers, *self.thoughts)) // 4


class StreamCut(Exception):
    """The stream broke before every choice finished; `partial` holds what arrived."""

    def __init__(self, partial: Reply, cause: BaseException | None, timed_out: bool = False) -> None:
        super().__init__(str(cause) if cause else "the stream ended before the reply finished")
        self.partial = partial
        self.cause = cause
        self.timed_out = timed_out


def from_completion(response: Any) -> Reply:
    """A whole (non-streamed) response."""
    choices = sorted(getattr(response, "choices", None) or [], key=lambda c: getattr(c, "index", 0) or 0)
    reply = Reply(usage=usage_of(getattr(response, "usage", None)))
    for choice in choices:
        message = getattr(choice, "message", None)
        _add(reply, _text(message, ("content",)), _text(message, REASONING_FIELDS))
        reply.finish_reasons.append(getattr(choice, "finish_reason", None))
    return reply


def whole_body(stream: Any) -> Reply | None:
    """The reply when a streamed request was answered by one whole JSON body, else None.

    Some gateways and older servers ignore `stream` and answer `Content-Type: application/json`; read as
    server-sent events that body holds no event at all, and every such reply would read as a cut stream.
    """
    from openai.types.chat import ChatCompletion

    response = getattr(stream, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    kind = str(headers.get("content-type", "")).split(";")[0].strip().lower()
    if not kind.endswith("json"):  # text/event-stream, or nothing said: read as a stream
        return None
    try:
        data = json.loads(response.read())
    except (ValueError, OSError):
        return None  # not JSON after all: the stream reader reports what it finds
    finally:
        response.close()
    if not isinstance(data, dict):
        return None
    reply = from_completion(ChatCompletion.construct(**data))
    reply.unstreamed = True
    return reply


def from_stream(
    stream: Any, deadline: float, on_tokens: Callable[[int], None] | None = None, clock=time.monotonic
) -> Reply:
    """Read a stream to its end; raises StreamCut when it breaks or the deadline passes first."""
    contents: dict[int, list[str]] = {}
    thoughts: dict[int, list[str]] = {}
    finish: dict[int, str | None] = {}
    state = {"usage": None, "chunks": 0, "timed_out": False}
    watchdog = _watchdog(stream, deadline - clock(), state)
    last_report = clock()
    try:
        for chunk in _chunks(stream):
            if getattr(chunk, "usage", None) is not None:
                state["usage"] = usage_of(chunk.usage)
            for choice in getattr(chunk, "choices", None) or []:
                index = getattr(choice, "index", 0) or 0
                delta = getattr(choice, "delta", None)
                text, thought = _text(delta, ("content",)), _text(delta, REASONING_FIELDS)
                contents.setdefault(index, []).append(text)
                thoughts.setdefault(index, []).append(thought)
                state["chunks"] += bool(text) + bool(thought)
                if getattr(choice, "finish_reason", None):
                    finish[index] = choice.finish_reason
            if on_tokens is not None and clock() - last_report >= PROGRESS_EVERY_S:
                on_tokens(state["chunks"])
                last_report = clock()
    except Exception as exc:  # a broken connection, or the watchdog closing it at the deadline
        raise StreamCut(_assemble(contents, thoughts, finish, state), exc, bool(state["timed_out"])) from None
    finally:
        watchdog.cancel()
    reply = _assemble(contents, thoughts, finish, state)
    if on_tokens is not None:
        on_tokens(reply.usage.completion_tokens if reply.usage else state["chunks"])
    if state["timed_out"] or not contents or len(finish) < len(contents):
        raise StreamCut(reply, None, bool(state["timed_out"]))
    return reply


def _chunks(stream: Any) -> Iterable[Any]:
    yield from stream


def _watchdog(stream: Any, seconds: float, state: dict[str, Any]) -> threading.Timer:
    """Close the stream at the deadline, so a reply that trickles forever cannot outlive it."""

    def fire() -> None:
        state["timed_out"] = True
        close = getattr(stream, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # closing a stream mid-read may raise in this thread; the reader sees the cut
                pass

    timer = threading.Timer(max(0.0, seconds), fire)
    timer.daemon = True
    timer.start()
    return timer


def _assemble(
    contents: dict[int, list[str]],
    thoughts: dict[int, list[str]],
    finish: dict[int, str | None],
    state: dict[str, Any],
) -> Reply:
    reply = Reply(usage=state["usage"], chunks=state["chunks"])
    for index in sorted(contents):
        _add(reply, "".join(contents[index]), "".join(thoughts.get(index, [])))
        reply.finish_reasons.append(finish.get(index))
    return reply


def _add(reply: Reply, content: str, separate_thought: str) -> None:
    """One choice: inline thought split off the content, joined to any separate one."""
    parts = reasoning.split(content)
    reply.answers.append(parts.answer)
    reply.thoughts.append("\n\n".join(t for t in (separate_thought.strip(), parts.reasoning) if t))


def _text(obj: Any, names: tuple[str, ...]) -> str:
    """The first string field of `names` on an SDK object (extra fields included), else ''."""
    if obj is None:
        return ""
    extra = getattr(obj, "model_extra", None) or {}
    for name in names:
        value = getattr(obj, name, None)
        if value is None:
            value = extra.get(name)
        if isinstance(value, str) and value:
            return value
    return ""


def usage_of(usage: Any) -> Usage | None:
    """The SDK's usage object as a Usage (reasoning tokens from completion_tokens_details)."""
    if usage is None:
        return None
    details = getattr(usage, "completion_tokens_details", None)
    return Usage(
        prompt_tokens=_int(getattr(usage, "prompt_tokens", 0)),
        completion_tokens=_int(getattr(usage, "completion_tokens", 0)),
        reasoning_tokens=_int(getattr(details, "reasoning_tokens", 0) if details is not None else 0),
        total_tokens=_int(getattr(usage, "total_tokens", 0)),
    )


def _int(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0
