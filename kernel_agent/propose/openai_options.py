"""The OpenAI provider's options, declared once by the provider (as an `llm` plugin declares its model's
`Options`): each field's default, help and flag. `optimize`'s plan stores them (`ProviderConfig` adds the
replay provider's one option), the command line offers them (cli/options.py builds a flag per field), and
`OpenAIProvider` takes its defaults from here.

No `openai` import here: a plan must load, and `eval` run, where the SDK is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_agent.core.config import Choice, option


class ReasoningEffort(Choice):
    """How hard a reasoning model thinks (OpenAI's `reasoning_effort`; sent only when set)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


@dataclass
class OpenAIOptions:
    """What a user sets for the openai provider (and any OpenAI-compatible endpoint)."""

    base_url: str = option("https://api.openai.com/v1", help="OpenAI-compatible endpoint (provider openai).")
    model: str = option("gpt-5-mini", help="Model name (provider openai).")
    api_key_file: Path | None = option(None, help="File holding the API key (default: $OPENAI_API_KEY).")
    prices_file: Path | None = option(
        None,
        flag="--prices",
        help='TOML file of extra model prices: [prices] "model" = [usd_per_1M_in, usd_per_1M_out].',
    )
    temperature: float = option(
        0.7,
        help="Sampling temperature (provider openai); not sent to models that refuse it (OpenAI's reasoning models, "
        "or any endpoint whose HTTP 400 names it).",
    )
    reasoning_effort: ReasoningEffort | None = option(
        None, help="low, medium or high: passed as reasoning_effort to reasoning models (dropped where refused)."
    )
    stream: bool = option(
        True,
        flag="--stream/--no-stream",
        help="Stream replies (the request deadline then covers the whole reply, and progress counts tokens).",
    )
    tokens_per_reply: int = option(
        8192,
        flag="--max-tokens-per-reply",
        minimum=1,
        help="Most tokens in one reply (the run's budget is --max-tokens).",
    )
    request_timeout: float = option(
        300.0,
        above=0,
        help="Seconds per LLM request, for the whole reply when streamed (reasoning models take minutes).",
    )
    max_retries: int = option(
        4, flag="--retries", minimum=0, help="Retries on 429, 5xx, timeouts and dropped connections."
    )
    prompts_dir: Path | None = option(
        None, flag="--prompts", help="Folder of jinja2 templates overriding the packaged prompts."
    )

    def arguments(self, samples: int, rules: dict[str, Any] | None) -> dict[str, Any]:
        """The keyword options `make_provider("openai", ...)` takes: these, `samples` candidates per request and
        the endpoint rules a resumed run learned (the factory reads the key file and the price file)."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.tokens_per_reply,
            "request_timeout": self.request_timeout,
            "max_retries": self.max_retries,
            "prompts_dir": self.prompts_dir,
            "prices_file": self.prices_file,
            "api_key_file": self.api_key_file,
            "n": samples,
            "reasoning_effort": str(self.reasoning_effort) if self.reasoning_effort else None,
            "stream": self.stream,
            "rules": rules,
        }


DEFAULTS = OpenAIOptions()
