"""Replies read from the SDK's own chunk and completion types: thoughts apart, usage, cuts and the deadline.

The transport's own errors (a real connection dropped mid-stream) are exercised against the test server in
tests/e2e/test_endpoints.py; here a plain ConnectionResetError stands for them."""

from __future__ import annotations

import threading
import time

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from kernel_agent.propose.reply import StreamCut, from_completion, from_stream

ANSWER = "```python\ndef kernel(x):\n    return x\n```\n"


def chunk(delta: dict | None = None, finish: str | None = None, index: int = 0, usage: dict | None = None):
    choices = [] if delta is None else [{"index": index, "delta": delta, "finish_reason": finish}]
    data = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": choices}
    if usage is not None:
        data["usage"] = usage
    return ChatCompletionChunk.model_validate(data)


def deltas(text: str, key: str = "content", index: int = 0) -> list:
    return [chunk({key: text[i : i + 8]}, index=index) for i in range(0, len(text), 8)]


USAGE = {
    "prompt_tokens": 10,
    "completion_tokens": 50,
    "total_tokens": 60,
    "completion_tokens_details": {"reasoning_tokens": 30},
}


def test_a_stream_with_a_separate_thought_and_two_choices() -> None:
    events = [
        *deltas("thinking hard", "reasoning_content"),
        *deltas(ANSWER),
        chunk({}, "stop"),
        *deltas("<think>inline</think>" + ANSWER, index=1),
        chunk({}, "length", index=1),
        chunk(usage=USAGE),
    ]
    seen: list[int] = []
    reply = from_stream(iter(events), time.monotonic() + 10, seen.append)
    assert reply.answers == [ANSWER, ANSWER]
    assert reply.thoughts == ["thinking hard", "inline"]
    assert reply.finish_reasons == ["stop", "length"]
    assert reply.usage is not None and reply.usage.reasoning_tokens == 30 and reply.usage.completion_tokens == 50
    assert seen[-1] == 50  # the last progress report is the endpoint's own count


def test_the_reasoning_field_of_ollama_and_newer_vllm_is_read_too() -> None:
    reply = from_stream(iter([*deltas("hmm", "reasoning"), *deltas(ANSWER), chunk({}, "stop")]), time.monotonic() + 5)
    assert reply.thoughts == ["hmm"] and reply.answers == [ANSWER] and reply.usage is None
    assert reply.estimated_tokens == reply.chunks > 0


def test_a_broken_connection_mid_stream_is_a_cut_holding_what_arrived() -> None:
    def broken():
        yield from deltas(ANSWER[:24])
        raise ConnectionResetError("peer closed connection without sending complete message body")

    with pytest.raises(StreamCut) as cut:
        from_stream(broken(), time.monotonic() + 5)
    assert not cut.value.timed_out and isinstance(cut.value.cause, ConnectionResetError)
    assert cut.value.partial.answers == [ANSWER[:24]] and cut.value.partial.estimated_tokens == 3


def test_a_stream_that_ends_before_its_finish_reason_is_a_cut() -> None:
    with pytest.raises(StreamCut) as cut:
        from_stream(iter(deltas(ANSWER)), time.monotonic() + 5)
    assert cut.value.cause is None and cut.value.partial.answers == [ANSWER]


class Trickle:
    """A stream that sends a chunk every 50 ms forever until closed, as a stuck reasoning model would."""

    def __init__(self) -> None:
        self.closed = threading.Event()

    def __iter__(self):
        while not self.closed.is_set():
            time.sleep(0.05)
            if self.closed.is_set():
                raise OSError("stream closed")  # what reading a closed response raises
            yield chunk({"content": "x"})

    def close(self) -> None:
        self.closed.set()


def test_the_deadline_covers_the_whole_stream_not_one_read() -> None:
    started = time.monotonic()
    with pytest.raises(StreamCut) as cut:
        from_stream(Trickle(), time.monotonic() + 0.4)
    elapsed = time.monotonic() - started
    assert cut.value.timed_out and 0.35 < elapsed < 1.5
    assert cut.value.partial.chunks >= 4


def test_a_whole_completion_splits_the_inline_thought() -> None:
    response = ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "plan</think>" + ANSWER},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
        }
    )
    reply = from_completion(response)
    assert reply.answers == [ANSWER] and reply.thoughts == ["plan"] and reply.usage.completion_tokens == 2
