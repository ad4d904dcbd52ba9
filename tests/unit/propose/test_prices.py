"""The dated price table: reasoning billed as output however the endpoint counts it, overrides, local models."""

from __future__ import annotations

import pytest

from kernel_agent.propose.prices import (
    DEFAULT_PRICES,
    PRICES_AS_OF,
    PriceFileError,
    Usage,
    call_cost,
    is_local,
    load_prices,
    price_of,
    unpriced_warning,
)


def test_the_table_is_dated_and_covers_each_vendor() -> None:
    assert PRICES_AS_OF[:4].isdigit()
    for model in ("gpt-5", "gpt-4o-mini", "o3", "claude-sonnet-4-5", "gemini-2.5-pro", "deepseek-reasoner"):
        assert price_of(model, DEFAULT_PRICES) is not None, model


def test_snapshots_and_provider_prefixes_take_their_familys_price() -> None:
    assert price_of("gpt-4o-mini-2024-07-18", DEFAULT_PRICES) == DEFAULT_PRICES["gpt-4o-mini"]
    assert price_of("claude-sonnet-4-5-20250929", DEFAULT_PRICES) == DEFAULT_PRICES["claude-sonnet-4-5"]
    assert price_of("models/gemini-2.5-flash", DEFAULT_PRICES) == DEFAULT_PRICES["gemini-2.5-flash"]
    assert price_of("SmolLM2-135M-Instruct", DEFAULT_PRICES) is None


def test_reasoning_inside_completion_tokens_is_not_billed_twice() -> None:
    inside = Usage(prompt_tokens=100, completion_tokens=500, reasoning_tokens=400, total_tokens=600)
    assert not inside.reasoning_outside and inside.billed_output == 500


def test_reasoning_reported_beside_completion_tokens_is_billed_as_output() -> None:
    outside = Usage(prompt_tokens=100, completion_tokens=100, reasoning_tokens=400, total_tokens=600)
    assert outside.reasoning_outside and outside.billed_output == 500
    assert call_cost("gpt-5", 100, outside.billed_output, DEFAULT_PRICES) == pytest.approx(
        (100 * 1.25 + 500 * 10.00) / 1e6
    )


def test_an_unknown_model_costs_nothing_and_a_remote_one_is_warned_about() -> None:
    assert call_cost("my-local-llama", 10**6, 10**6, DEFAULT_PRICES) == 0.0
    assert "--prices" in unpriced_warning("my-model", "https://api.example.com/v1", DEFAULT_PRICES)
    assert unpriced_warning("my-model", "http://127.0.0.1:8080/v1", DEFAULT_PRICES) == ""
    assert unpriced_warning("gpt-5", "https://api.openai.com/v1", DEFAULT_PRICES) == ""
    assert is_local("http://localhost:11434/v1") and is_local("http://192.168.1.5/v1")
    assert not is_local("https://api.openai.com/v1")


def test_a_price_file_overrides_and_a_bad_one_is_one_line(tmp_path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('[prices]\n"gpt-5" = [1, 2]\n"my-model" = [0.5, 0.5]\n')
    prices = load_prices(path)
    assert prices["gpt-5"] == (1.0, 2.0) and prices["my-model"] == (0.5, 0.5) and "o3" in prices
    path.write_text('[prices]\n"gpt-5" = [-1, 2]\n')
    with pytest.raises(PriceFileError, match="non-negative"):
        load_prices(path)
