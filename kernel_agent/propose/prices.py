"""What an LLM exchange cost: a dated list-price table, a TOML override, and the arithmetic.

Why a table in the code: a budget (`--max-cost`) and `runs show`'s dollars per verified win are only as
good as the prices behind them, and a user must be able to see how old they are (PRICES_AS_OF) and correct
them without a release (`--prices FILE`). Reasoning tokens are billed as output by every vendor here; a
server that reports them outside `completion_tokens` is charged for them too (`Usage.billed_output`).
A model the table does not know costs nothing (a local server's model); a remote endpoint serving one is
said once (`unpriced_warning`).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

PRICES_AS_OF = "2025-11"  # the vendors' list prices for standard (not batch, not cached-input) use, at this date
# USD per 1M (prompt, completion) tokens. A dated snapshot (gpt-4o-2024-08-06) takes its family's price.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    # OpenAI
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-5.1": (1.25, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "o1": (15.00, 60.00),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    # Anthropic (its OpenAI-compatible endpoint bills as its Messages API)
    "claude-opus-4-5": (5.00, 25.00),
    "claude-opus-4-1": (15.00, 75.00),
    "claude-opus-4": (15.00, 75.00),
    "claude-sonnet-4-5": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-haiku-4-5": (1.00, 5.00),
    "claude-3-5-haiku": (0.80, 4.00),
    # Google (its OpenAI-compatible endpoint; gemini-2.5-pro's price for prompts up to 200k tokens)
    "gemini-2.5-pro": (1.25, 10.00),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-flash-lite": (0.10, 0.40),
    "gemini-2.0-flash": (0.10, 0.40),
    # DeepSeek (V3.2 behind both names; cache-miss input)
    "deepseek-chat": (0.28, 0.42),
    "deepseek-reasoner": (0.28, 0.42),
}
Prices = dict[str, tuple[float, float]]


class PriceFileError(ValueError):
    """A price file that cannot be used (one line naming the file and the fix)."""


@dataclass(frozen=True)
class Usage:
    """Tokens of one exchange as the endpoint reported them (0 where it did not)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0  # completion_tokens_details.reasoning_tokens: part of the output, billed as output
    total_tokens: int = 0

    @property
    def reasoning_outside(self) -> bool:
        """Whether the endpoint left reasoning out of completion_tokens: its total counts them on top."""
        return self.reasoning_tokens > 0 and self.total_tokens >= (
            self.prompt_tokens + self.completion_tokens + self.reasoning_tokens
        )

    @property
    def billed_output(self) -> int:
        """Output tokens the vendor bills: completion plus reasoning where the two are reported apart."""
        return self.completion_tokens + (self.reasoning_tokens if self.reasoning_outside else 0)


def load_prices(path: Path | None = None) -> Prices:
    """DEFAULT_PRICES overlaid with a TOML file's `[prices] "model" = [usd_per_1M_in, usd_per_1M_out]`."""
    prices = dict(DEFAULT_PRICES)
    if path is None:
        return prices
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        data = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise PriceFileError(f"{path}: cannot read the price file ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise PriceFileError(f"{path}: not valid TOML ({exc})") from None
    table = data.get("prices", {})
    if not isinstance(table, dict):
        raise PriceFileError(f'{path}: [prices] must be a table of "model" = [in, out]')
    for model, pair in table.items():
        prices[model] = _price_pair(pair, model, path)
    return prices


def _price_pair(pair: Any, model: str, path: Path) -> tuple[float, float]:
    ok = (
        isinstance(pair, list)
        and len(pair) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in pair)
    )
    if not ok:
        raise PriceFileError(
            f"{path}: prices.{model!r} must be [usd_per_1M_prompt, usd_per_1M_completion], two non-negative numbers"
        )
    return float(pair[0]), float(pair[1])


def price_of(model: str, prices: Prices) -> tuple[float, float] | None:
    """Exact match, else the longest known prefix (dated snapshots such as gpt-4o-2024-08-06); a provider
    prefix (`openai/gpt-5`, `models/gemini-2.5-pro`) is dropped first."""
    for name in (model, model.rsplit("/", 1)[-1]):
        if name in prices:
            return prices[name]
        prefixes = [m for m in prices if name.startswith(m + "-")]
        if prefixes:
            return prices[max(prefixes, key=len)]
    return None


def is_local(base_url: str) -> bool:
    """A server on this machine or a private network: what it runs costs nothing per token."""
    host = urlparse(base_url).hostname or ""
    if host == "localhost" or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def call_cost(model: str, prompt_tokens: int, output_tokens: int, prices: Prices) -> float:
    """USD for one exchange (`output_tokens`: `Usage.billed_output`, reasoning included); 0.0 for a model
    without a price, which is what a local server's model is."""
    price = price_of(model, prices)
    if price is None:
        return 0.0
    return (prompt_tokens * price[0] + output_tokens * price[1]) / 1e6


def unpriced_warning(model: str, base_url: str, prices: Prices) -> str:
    """One line when a remote endpoint serves a model the table has no price for ('' otherwise): its cost is
    counted as $0, so a --max-cost budget would never stop it."""
    if price_of(model, prices) is not None or is_local(base_url):
        return ""
    return (
        f"no price for model {model!r} (table of {PRICES_AS_OF}); its calls count as $0 and --max-cost cannot stop "
        'them: add it with --prices FILE ([prices] "MODEL" = [usd_per_1M_in, usd_per_1M_out])'
    )
