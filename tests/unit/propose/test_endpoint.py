"""What an endpoint accepts: the first guess per model family, and the lessons read from real 400 bodies."""

from __future__ import annotations

import pytest

from kernel_agent.propose.endpoint import (
    MIN_REPLY_TOKENS,
    EndpointRules,
    Request,
    body,
    is_context_length,
    lesson,
    prior,
    shrink,
)

MESSAGES = [{"role": "user", "content": "hi"}]
OPENAI_MAX_TOKENS = (
    "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
)
OPENAI_TEMPERATURE = (
    "Unsupported value: 'temperature' does not support 0.7 with this model. Only the default (1) value is supported."
)


def request(**overrides) -> Request:
    return Request(**{"model": "m", "messages": MESSAGES, "n": 3, "max_tokens": 100, "temperature": 0.7, **overrides})


@pytest.mark.parametrize("model", ["gpt-5", "gpt-5-mini", "gpt-5.1", "o3", "o4-mini", "o1-2024-12-17", "openai/o3"])
def test_openai_reasoning_families_start_with_max_completion_tokens_and_no_temperature(model: str) -> None:
    sent = body(request(model=model), prior(model))
    assert sent["max_completion_tokens"] == 100 and "max_tokens" not in sent and "temperature" not in sent


@pytest.mark.parametrize("model", ["gpt-4o-mini", "gpt-5-chat-latest", "claude-sonnet-4-5", "o3ish", "qwen3:0.6b"])
def test_other_models_start_with_the_classic_parameters(model: str) -> None:
    sent = body(request(model=model), prior(model))
    assert sent["max_tokens"] == 100 and sent["temperature"] == 0.7 and sent["n"] == 3


def test_streaming_asks_for_usage_and_no_stream_sends_neither() -> None:
    assert body(request(), EndpointRules())["stream_options"] == {"include_usage": True}
    sent = body(request(), EndpointRules(stream=False))
    assert "stream" not in sent and "stream_options" not in sent


def test_openai_400s_teach_the_rename_and_the_drop_each_once() -> None:
    rules = EndpointRules()
    renamed = lesson(rules, OPENAI_MAX_TOKENS, "max_tokens")
    assert renamed is not None and renamed.token_param == "max_completion_tokens"
    assert renamed.learned == ("sends max_completion_tokens instead of max_tokens",)
    dropped = lesson(renamed, OPENAI_TEMPERATURE, "temperature")
    assert dropped is not None and dropped.dropped == ("temperature",)
    sent = body(request(), dropped)
    assert "temperature" not in sent and sent["max_completion_tokens"] == 100
    assert lesson(dropped, OPENAI_MAX_TOKENS, "max_tokens") is None  # already learned: a second 400 is an error
    assert lesson(dropped, OPENAI_TEMPERATURE, "temperature") is None


def test_a_refused_n_asks_for_one_reply_and_a_refused_stream_stops_streaming() -> None:
    single = lesson(EndpointRules(), "n: only n=1 is supported", "n")
    assert single is not None and body(request(), single)["n"] == 1
    plain = lesson(EndpointRules(), "Unrecognized request argument supplied: stream")
    assert plain is not None and not plain.stream and "stream" not in body(request(), plain)


def test_a_refusal_naming_the_parameter_only_in_prose_is_understood() -> None:
    learned = lesson(EndpointRules(), "reasoning_effort is not supported for this model")
    assert learned is not None and "reasoning_effort" not in body(request(reasoning_effort="high"), learned)


@pytest.mark.parametrize(
    "message",
    [
        "messages: field required",
        "Invalid API key",
        "temperature and top_p cannot both be unsupported",  # names two parameters: no guess
        "The model `m` does not exist",
    ],
)
def test_a_400_for_another_reason_teaches_nothing(message: str) -> None:
    assert lesson(EndpointRules(), message) is None


@pytest.mark.parametrize(
    ("message", "code", "expected"),
    [
        ("This model's maximum context length is 8192 tokens. However, your messages resulted in 9000", None, True),
        ("Requested tokens (9000) exceed context window of 8192", None, True),  # llama.cpp's server
        ("anything", "context_length_exceeded", True),
        ("prompt is too long: 210000 tokens > 200000 maximum", None, True),  # Anthropic
        (OPENAI_MAX_TOKENS, "unsupported_parameter", False),
    ],
)
def test_context_length_refusals_are_recognised(message: str, code: str | None, expected: bool) -> None:
    assert is_context_length(message, code) is expected


def test_rules_round_trip_through_json_and_ignore_unknown_parameters() -> None:
    rules = lesson(lesson(EndpointRules(), OPENAI_MAX_TOKENS), OPENAI_TEMPERATURE)
    assert rules is not None and EndpointRules.from_json(rules.to_json()) == rules
    assert EndpointRules.from_json(rules.to_json()).learned == rules.learned
    odd = EndpointRules.from_json({"token_param": "tokens", "dropped": ["messages", "top_p"]})
    assert odd.token_param == "max_tokens" and odd.dropped == ("top_p",)


VLLM_CONTEXT = (
    "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens "
    "(808 in the messages, 8192 in the completion). Please reduce the length of the messages or completion."
)


def test_a_refusal_stating_the_sizes_cuts_the_reply_room_to_fit_and_keeps_the_history() -> None:
    shrunk = shrink(["a", "b"], 8192, VLLM_CONTEXT)
    assert shrunk is not None and shrunk.history == ["a", "b"] and shrunk.reply_tokens == 4096 - 808 - 16
    assert "(4096 tokens)" in shrunk.note


def test_without_sizes_the_oldest_attempts_go_first_then_the_reply_room_halves() -> None:
    message = "Requested tokens (9000) exceed context window"  # llama.cpp's wording without the limit's number
    steps, history, room = [], list(range(10)), 8192
    while (shrunk := shrink(history, room, message)) is not None:
        history, room = shrunk.history, shrunk.reply_tokens
        steps.append((len(history), room))
    assert steps == [(4, 8192), (2, 8192), (1, 8192), (0, 8192), (0, 4096), (0, 2048), (0, 1024), (0, 512), (0, 256)]
    assert steps[-1][1] == MIN_REPLY_TOKENS


def test_a_prompt_too_big_for_any_reply_room_drops_history_instead() -> None:
    message = "This model's maximum context length is 1000 tokens. (900 in the messages, 8192 in the completion)"
    shrunk = shrink(["old", "new"], 8192, message)
    assert shrunk is not None and shrunk.history == ["new"] and shrunk.reply_tokens == 8192
