"""The `openai` provider: candidate kernels from any OpenAI-compatible chat endpoint.

Why its own retries: the SDK's built-in retries are invisible (no count, no
cost), while a run must record how many attempts each exchange took and must
never die because an endpoint is flaky; so the SDK runs with `max_retries=0`
and this module retries 429, 5xx, timeouts and connection errors with capped,
jittered exponential backoff. Every exchange (or cache reuse) is one `LLMCall`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import openai

from kernel_agent.core.text import clean
from kernel_agent.propose.base import LLMCall, Proposal, ProposalBatch, ProposalContext
from kernel_agent.propose.parse import extract_candidate, summary_line
from kernel_agent.propose.prompts import PromptTemplateError, render_messages

API_KEY_ENV = "OPENAI_API_KEY"
# USD per 1M (prompt, completion) tokens; list prices when written. Extend or correct with a TOML file.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
}
RETRYABLE_STATUS = frozenset({408, 409, 429})


class ProviderConfigError(ValueError):
    """A provider cannot be built as configured (one line that names the fix)."""


def resolve_api_key(key_file: Path | None = None) -> str:
    """The key from `key_file` when one is given, else from OPENAI_API_KEY; never from argv (it
    would leak into `ps`)."""
    if key_file is not None:
        try:
            key = Path(key_file).read_text().strip()
        except OSError as exc:
            raise ProviderConfigError(
                f"{key_file}: cannot read the API key file ({exc.strerror}); fix the path or set {API_KEY_ENV}"
            ) from None
        if not key:
            raise ProviderConfigError(
                f"{key_file}: the API key file is empty; write the key into it or set {API_KEY_ENV}"
            )
        return key
    key = os.environ.get(API_KEY_ENV, "").strip()
    if not key:
        hint = f"a local server without auth accepts any value, e.g. {API_KEY_ENV}=local"
        raise ProviderConfigError(f"no API key: set {API_KEY_ENV} or pass --api-key-file FILE ({hint})")
    return key


def load_prices(path: Path | None = None) -> dict[str, tuple[float, float]]:
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
        raise ProviderConfigError(f"{path}: cannot read the price file ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProviderConfigError(f"{path}: not valid TOML ({exc})") from None
    table = data.get("prices", {})
    if not isinstance(table, dict):
        raise ProviderConfigError(f'{path}: [prices] must be a table of "model" = [in, out]')
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
        raise ProviderConfigError(
            f"{path}: prices.{model!r} must be [usd_per_1M_prompt, usd_per_1M_completion], two non-negative numbers"
        )
    return float(pair[0]), float(pair[1])


def price_of(model: str, prices: dict[str, tuple[float, float]]) -> tuple[float, float] | None:
    """Exact match, else the longest known prefix (dated snapshots such as gpt-4o-2024-08-06)."""
    if model in prices:
        return prices[model]
    prefixes = [m for m in prices if model.startswith(m + "-")]
    return prices[max(prefixes, key=len)] if prefixes else None


def call_cost(model: str, prompt_tokens: int, completion_tokens: int, prices: dict[str, tuple[float, float]]) -> float:
    """USD for one exchange; 0.0 for models without a price (local servers)."""
    price = price_of(model, prices)
    if price is None:
        return 0.0
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


def prompt_hash(request: dict[str, Any]) -> str:
    """Cache key: sha256 of the canonical JSON of model, messages, temperature, n and max_tokens."""
    keys = ("model", "messages", "temperature", "n", "max_tokens")
    canonical = json.dumps({k: request.get(k) for k in keys}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def to_proposals(
    texts: list[str], entry_point: str, origin: str, call_index: int, finish_reasons: list[str | None] | None = None
) -> list[Proposal]:
    """One Proposal per choice; a reply without a usable module becomes a parse error, not a crash."""
    proposals = []
    for i, text in enumerate(texts):
        source, reason = extract_candidate(text, entry_point)
        finish = finish_reasons[i] if finish_reasons and i < len(finish_reasons) else None
        if reason and finish == "length":
            reason += " (the reply hit max_tokens)"
        proposals.append(
            Proposal(
                source=source, origin=origin, note=summary_line(text), parse_error=reason, llm_call_index=call_index
            )
        )
    return proposals


class OpenAIProvider:
    """Chat completions against `base_url`; see the module docstring for the retry policy."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str,
        temperature: float = 0.7,
        n: int = 4,
        max_tokens: int = 8192,
        request_timeout: float = 300.0,
        max_retries: int = 4,
        prompts_dir: Path | None = None,
        prices: dict[str, tuple[float, float]] | None = None,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 60.0,
        max_requests_per_round: int = 4,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        _validate(
            base_url=base_url,
            model=model,
            api_key=api_key,
            temperature=temperature,
            n=n,
            max_tokens=max_tokens,
            request_timeout=request_timeout,
            max_retries=max_retries,
        )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.temperature = temperature
        self.n = n
        self.max_tokens = max_tokens
        self.request_timeout = request_timeout
        self.max_retries = max_retries
        self.prompts_dir = Path(prompts_dir) if prompts_dir is not None else None
        self.prices = dict(DEFAULT_PRICES if prices is None else prices)
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.max_requests_per_round = max(1, max_requests_per_round)
        self._sleep = sleep
        self.client = openai.OpenAI(base_url=self.base_url, api_key=api_key, timeout=request_timeout, max_retries=0)

    def propose(self, context: ProposalContext) -> ProposalBatch:
        """Ask for `context.samples` candidates; endpoint faults end up in the batch's calls, never raised."""
        messages = self.render(context)
        wanted = context.samples if context.samples > 0 else self.n
        batch = ProposalBatch()
        for _ in range(self.max_requests_per_round):
            missing = wanted - len(batch.proposals)
            if missing <= 0:
                break
            call, finish_reasons = self._exchange(messages, missing, context.cache_lookup)
            batch.calls.append(call)
            if call.error or not call.response_texts:
                break
            index = len(batch.calls) - 1
            proposals = to_proposals(call.response_texts, context.problem.entry_point, self.name, index, finish_reasons)
            batch.proposals.extend(proposals[:missing])
        return batch

    def render(self, context: ProposalContext) -> list[dict[str, str]]:
        """The chat messages; a broken override template is a configuration error, reported in one line."""
        try:
            return render_messages(context, self.prompts_dir)
        except PromptTemplateError as exc:
            raise ProviderConfigError(f"prompt template error: {exc}; fix the template or drop --prompts") from None

    def request_body(self, messages: list[dict[str, str]], n: int) -> dict[str, Any]:
        return {
            "messages": messages,
            "model": self.model,
            "temperature": self.temperature,
            "n": n,
            "max_tokens": self.max_tokens,
        }

    def _exchange(
        self, messages: list[dict[str, str]], n: int, cache_lookup: Callable[[str], LLMCall | None]
    ) -> tuple[LLMCall, list[str | None]]:
        """One cached reuse or one live exchange (with its retries)."""
        request = self.request_body(messages, n)
        key = prompt_hash(request)
        hit = cache_lookup(key)
        if hit is not None and hit.response_texts:
            reused = replace(hit, cached=True, cost_usd=0.0, latency_s=0.0, attempts=0, error=None)
            return reused, [None] * len(hit.response_texts)
        return self._live(request, key)

    def _live(self, request: dict[str, Any], key: str) -> tuple[LLMCall, list[str | None]]:
        call = LLMCall(prompt_hash=key, model=self.model, base_url=self.base_url, request=request, response_texts=[])
        start = time.monotonic()
        while True:
            try:
                response = self.client.chat.completions.create(**request)
            except Exception as exc:  # endpoint faults of any kind are recorded, never raised
                if not (retryable(exc) and call.attempts <= self.max_retries):
                    call.error = (
                        f"{describe(exc, self.request_timeout)} ({_attempts_text(call.attempts, retryable(exc))})"
                    )
                    call.latency_s = time.monotonic() - start
                    return call, []
                self._sleep(self.backoff_delay(call.attempts, exc))
                call.attempts += 1
                continue
            call.latency_s = time.monotonic() - start
            return self._fill(call, response)

    def _fill(self, call: LLMCall, response: Any) -> tuple[LLMCall, list[str | None]]:
        """Texts, usage and cost from a response; a response without choices is an endpoint fault."""
        choices = sorted(getattr(response, "choices", None) or [], key=lambda c: getattr(c, "index", 0) or 0)
        usage = getattr(response, "usage", None)
        call.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        call.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        call.cost_usd = call_cost(self.model, call.prompt_tokens, call.completion_tokens, self.prices)
        call.response_texts = [_content(c) for c in choices]
        if not choices:
            call.error = "the endpoint returned no choices"
        return call, [getattr(c, "finish_reason", None) for c in choices]

    def backoff_delay(self, attempt: int, exc: Exception | None = None) -> float:
        """Exponential from backoff_base_s with up to 50% jitter, at least any Retry-After, capped."""
        delay = min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempt - 1))
        delay += random.uniform(0, delay / 2)
        delay = max(delay, retry_after(exc))
        return min(self.backoff_cap_s, delay)


def _validate(**options: Any) -> None:
    """Reject nonsense settings up front, in one line naming the option."""
    if not options["base_url"] or not str(options["base_url"]).startswith(("http://", "https://")):
        raise ProviderConfigError(
            f"base URL {options['base_url']!r} must start with http:// or https:// (e.g. https://api.openai.com/v1)"
        )
    if not options["model"]:
        raise ProviderConfigError("no model name: pass --model (e.g. gpt-4o-mini)")
    if not options["api_key"]:
        raise ProviderConfigError(f"no API key: set {API_KEY_ENV} or pass --api-key-file FILE")
    checks = {
        "temperature": options["temperature"] >= 0,
        "n": options["n"] >= 1,
        "max_tokens": options["max_tokens"] >= 1,
        "request_timeout": options["request_timeout"] > 0,
        "max_retries": options["max_retries"] >= 0,
    }
    for option, ok in checks.items():
        if not ok:
            raise ProviderConfigError(f"{option}={options[option]!r} is out of range")


def _content(choice: Any) -> str:
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else ""


def retryable(exc: Exception) -> bool:
    """Rate limits, server errors, timeouts and dropped connections are worth another try; other 4xx are not."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
    return isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError))


def retry_after(exc: Exception | None) -> float:
    """Seconds from a Retry-After header (numeric form only), else 0."""
    response = getattr(exc, "response", None)
    value = getattr(response, "headers", {}).get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else 0.0
    except ValueError:
        return 0.0


def describe(exc: Exception, timeout: float) -> str:
    """One line for an endpoint fault, naming the likely fix where there is one."""
    if isinstance(exc, openai.APIStatusError):
        hint = {
            401: "; check the API key",
            403: "; check the API key's permissions",
            404: "; check --model and --base-url",
        }.get(exc.status_code, "")
        return _one_line(f"HTTP {exc.status_code}: {_error_message(exc)}{hint}")
    if isinstance(exc, openai.APITimeoutError):
        return f"request timed out after {timeout:g} s"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return _one_line(f"cannot reach the endpoint: {type(cause).__name__}: {cause}")
    return _one_line(f"unexpected {type(exc).__name__}: {exc}")


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(exc, "message", "") or exc)


def _attempts_text(attempts: int, was_retryable: bool) -> str:
    if not was_retryable:
        return "not retried"
    return f"gave up after {attempts} attempt{'s' if attempts != 1 else ''}"


def _one_line(text: str, limit: int = 400) -> str:
    """An endpoint's error text is foreign: cleaned before it is stored and printed."""
    return clean(text, limit)
