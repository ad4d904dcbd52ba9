"""The `openai` provider: candidate kernels from any OpenAI-compatible chat endpoint.

Why its own retries: the SDK's built-in retries are invisible (no count, no
cost), while a run must record how many attempts each exchange took and must
never die because an endpoint is flaky; so the SDK runs with `max_retries=0`
and this module retries 429, 5xx, timeouts, dropped connections and streams cut
mid-reply with capped, jittered exponential backoff. A 400 that names a parameter
the endpoint refuses is sent again once without it (`endpoint.lesson`); one that
says the prompt is too long is sent again with fewer earlier attempts in it.
Every exchange (or cache reuse) is one `LLMCall`, with its thought kept apart.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import openai

from kernel_agent.core.text import clean
from kernel_agent.propose import prices as prices_module
from kernel_agent.propose import reasoning
from kernel_agent.propose.base import LLMCall, Proposal, ProposalBatch, ProposalContext
from kernel_agent.propose.endpoint import (
    MAX_SHRINKS,
    EndpointRules,
    Request,
    body,
    is_context_length,
    lesson,
    prior,
    shrink,
    unstreamed,
)
from kernel_agent.propose.openai_options import DEFAULTS, ReasoningEffort
from kernel_agent.propose.parse import extract_candidate, summary_line
from kernel_agent.propose.prices import DEFAULT_PRICES, Prices, Usage, call_cost
from kernel_agent.propose.prompts import PromptTemplateError, render_messages, template_hashes
from kernel_agent.propose.reply import Reply, StreamCut, from_completion, from_stream, whole_body

__all__ = ["DEFAULT_PRICES", "OpenAIProvider", "ProviderConfigError", "call_cost", "load_prices", "prompt_hash"]

API_KEY_ENV = "OPENAI_API_KEY"
RETRYABLE_STATUS = frozenset({408, 409, 429})
REASONING_EFFORTS = tuple(effort.value for effort in ReasoningEffort)


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


def load_prices(path: Path | None = None) -> Prices:
    """The dated price table overlaid with a TOML file (see `prices.load_prices`); a bad file is a config error."""
    try:
        return prices_module.load_prices(path)
    except prices_module.PriceFileError as exc:
        raise ProviderConfigError(str(exc)) from None


def prompt_hash(request: dict[str, Any]) -> str:
    """Cache key: sha256 of the canonical JSON of model, messages, temperature, n and the reply's token limit
    (whichever name carries it), plus the reasoning effort when one is set."""
    keys = ("model", "messages", "temperature", "n", "max_tokens")
    logical = {k: request.get(k) for k in keys}
    if logical["max_tokens"] is None:
        logical["max_tokens"] = request.get("max_completion_tokens")
    if request.get("reasoning_effort"):
        logical["reasoning_effort"] = request["reasoning_effort"]
    canonical = json.dumps(logical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def to_proposals(
    texts: list[str], entry_point: str, origin: str, call_index: int, finish_reasons: list[str | None] | None = None
) -> list[Proposal]:
    """One Proposal per choice; a reply without a usable module becomes a parse error, not a crash. An inline
    thought still in a text (a reply recorded before thoughts were split off) is dropped before parsing."""
    proposals = []
    for i, raw in enumerate(texts):
        text = reasoning.split(raw).answer if isinstance(raw, str) else raw
        source, reason = extract_candidate(text, entry_point)
        finish = finish_reasons[i] if finish_reasons and i < len(finish_reasons) else None
        if reason and finish == "length":
            reason += " (the reply hit max_tokens)"
        if reason and not (text or "").strip() and isinstance(raw, str) and raw.strip():
            cut = " (it hit max_tokens)" if finish == "length" else ""
            reason = f"the reply holds only reasoning, no answer{cut}"
        proposals.append(
            Proposal(
                source=source, origin=origin, note=summary_line(text), parse_error=reason, llm_call_index=call_index
            )
        )
    return proposals


@dataclass
class Cuts:
    """Replies of one exchange that broke mid-stream: each was paid for (its prompt, what it streamed), so
    each is counted once in the call that finally succeeded or gave up."""

    count: int = 0
    output_tokens: int = 0

    def add(self, tokens: int) -> None:
        self.count += 1
        self.output_tokens += tokens


class ContextTooLong(Exception):
    """The endpoint said the prompt does not fit; `call` is the exchange so far (its attempts count)."""

    def __init__(self, call: LLMCall, message: str) -> None:
        super().__init__(message)
        self.call = call


def from_options(
    *, api_key_file: Path | None = None, prices_file: Path | None = None, **options: Any
) -> OpenAIProvider:
    """The provider as registered (kernel_agent.propose): the key is read here, from a file or the environment,
    and a price file over the dated table (a bad one is a config error)."""
    if prices_file is not None:
        options["prices"] = load_prices(prices_file)
    return OpenAIProvider(api_key=resolve_api_key(api_key_file), **options)


class OpenAIProvider:
    """Chat completions against `base_url`; see the module docstring for the retry policy."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str,
        temperature: float = DEFAULTS.temperature,
        n: int = 4,
        max_tokens: int = DEFAULTS.tokens_per_reply,
        request_timeout: float = DEFAULTS.request_timeout,
        max_retries: int = DEFAULTS.max_retries,
        prompts_dir: Path | None = None,
        prices: Prices | None = None,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 60.0,
        max_requests_per_round: int = 4,
        sleep: Callable[[float], None] = time.sleep,
        reasoning_effort: str | None = None,
        stream: bool = DEFAULTS.stream,
        rules: dict[str, Any] | None = None,
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
            reasoning_effort=reasoning_effort,
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
        self.reasoning_effort = reasoning_effort
        self.reply_room = max_tokens  # lowered when a context-length refusal showed the reply cannot have more
        self._sleep = sleep
        # Learned rules of a stored run win over the first guess; --no-stream wins over both.
        known = EndpointRules.from_json(rules) if rules else prior(model)
        self.rules = replace(known, stream=known.stream and stream)
        self._rules_lock = threading.Lock()
        self.client = openai.OpenAI(base_url=self.base_url, api_key=api_key, timeout=request_timeout, max_retries=0)

    def propose(self, context: ProposalContext) -> ProposalBatch:
        """Ask for `context.samples` candidates; endpoint faults end up in the batch's calls, never raised."""
        wanted = context.samples if context.samples > 0 else self.n
        batch = ProposalBatch()
        for _ in range(self.max_requests_per_round):
            missing = wanted - len(batch.proposals)
            if missing <= 0:
                break
            call, finish_reasons = self._fitted(context, missing)
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

    def request(self, messages: list[dict[str, str]], n: int, max_tokens: int | None = None) -> Request:
        """What this provider asks for, before the endpoint's rules shape it."""
        return Request(
            model=self.model,
            messages=messages,
            n=n,
            max_tokens=max_tokens or self.max_tokens,
            temperature=self.temperature,
            reasoning_effort=self.reasoning_effort,
        )

    def request_body(self, messages: list[dict[str, str]], n: int) -> dict[str, Any]:
        """The body as it would be sent now (under the rules learned so far)."""
        return body(self.request(messages, n), self.rules)

    def _fitted(self, context: ProposalContext, n: int) -> tuple[LLMCall, list[str | None]]:
        """One exchange whose request fits the model's context: a context-length refusal shrinks it (`_shrink`)
        and sends it again; every refused try counts in the call's attempts and notes. A reply room cut to fit
        is kept for later requests (the context does not grow)."""
        history, reply_tokens = list(context.history), self.reply_room
        notes: list[str] = []
        refused_attempts = 0
        for shrinks in range(MAX_SHRINKS + 1):
            messages = self.render(replace(context, history=history))
            try:
                call, finish = self._exchange(self.request(messages, n, reply_tokens), context)
            except ContextTooLong as refused:
                shrunk = shrink(history, reply_tokens, str(refused)) if shrinks < MAX_SHRINKS else None
                if shrunk is None:
                    call, finish = refused.call, []
                    call.error = _one_line(f"the prompt does not fit the model's context: {refused}")
                    break
                refused_attempts += refused.call.attempts
                history, reply_tokens = shrunk.history, shrunk.reply_tokens
                notes.append(shrunk.note)
                continue
            break
        call.attempts += refused_attempts
        call.notes[:0] = notes
        call.templates = template_hashes(self.prompts_dir)
        if call.error is None and reply_tokens < self.reply_room:
            self.reply_room = reply_tokens
        return call, finish

    def _exchange(self, request: Request, context: ProposalContext) -> tuple[LLMCall, list[str | None]]:
        """One cached reuse or one live exchange (with its retries)."""
        logical = body(request, EndpointRules(stream=False))
        key = prompt_hash(logical)
        hit = context.cache_lookup(key)
        if hit is not None and hit.response_texts:
            reused = replace(hit, cached=True, cost_usd=0.0, latency_s=0.0, attempts=0, error=None, lessons=[])
            return reused, [None] * len(hit.response_texts)
        return self._live(request, key, context.on_tokens)

    def _live(
        self, request: Request, key: str, on_tokens: Callable[[int], None] | None
    ) -> tuple[LLMCall, list[str | None]]:
        sent = body(request, self.rules)
        call = LLMCall(prompt_hash=key, model=self.model, base_url=self.base_url, request=sent, response_texts=[])
        start = time.monotonic()
        cuts = Cuts()
        while True:
            sent = body(request, self.rules)
            call.request = sent
            try:
                reply = self._send(sent, on_tokens)
            except StreamCut as cut:
                cuts.add(cut.partial.estimated_tokens)
                why = f"deadline of {self.request_timeout:g} s" if cut.timed_out else _cause(cut)
                call.notes.append(
                    f"attempt {call.attempts}: the stream was cut after ~{cut.partial.estimated_tokens} tokens ({why})"
                )
                if call.attempts > self.max_retries:
                    what = f"request timed out after {self.request_timeout:g} s" if cut.timed_out else "stream cut"
                    if _empty(cut):
                        what += " (the endpoint sent no stream events at all; if it does not stream, pass --no-stream)"
                    return self._failed(call, f"{what} ({_attempts_text(call.attempts, True)})", start, cuts)
                self._sleep(self.backoff_delay(call.attempts))
                call.attempts += 1
                continue
            except openai.BadRequestError as exc:
                message, param, code = _error_fields(exc)
                if is_context_length(message, code):
                    call.latency_s = time.monotonic() - start
                    raise ContextTooLong(call, _one_line(message)) from None
                if sent == body(request, self.rules):  # else another request learned it meanwhile: send again
                    learned = self._learn(message, param)
                    if learned is None:
                        error = f"{describe(exc, self.request_timeout)} (not retried)"
                        return self._failed(call, error, start, cuts)
                    call.lessons.append(learned)
                    call.endpoint_rules = self.rules.to_json()
                call.attempts += 1
                continue
            except Exception as exc:  # endpoint faults of any kind are recorded, never raised
                if not (retryable(exc) and call.attempts <= self.max_retries):
                    error = f"{describe(exc, self.request_timeout)} ({_attempts_text(call.attempts, retryable(exc))})"
                    return self._failed(call, error, start, cuts)
                self._sleep(self.backoff_delay(call.attempts, exc))
                call.attempts += 1
                continue
            call.latency_s = time.monotonic() - start
            if reply.unstreamed:
                self._learn_unstreamed(call)
            return self._fill(call, reply, cuts)

    def _send(self, sent: dict[str, Any], on_tokens: Callable[[int], None] | None) -> Reply:
        """One HTTP exchange: streamed under a deadline for the whole reply, or whole."""
        if not sent.get("stream"):
            return from_completion(self.client.chat.completions.create(**sent))
        deadline = time.monotonic() + self.request_timeout
        stream = self.client.chat.completions.create(**sent)
        whole = whole_body(stream)
        if whole is not None:
            return whole
        return from_stream(stream, deadline, on_tokens)

    def _learn_unstreamed(self, call: LLMCall) -> None:
        """A whole reply to a streamed request is used as it is; later requests ask for it whole."""
        with self._rules_lock:
            learned = unstreamed(self.rules)
            if learned is not None:
                self.rules = learned
        if learned is not None:
            call.lessons.append(f"{self.base_url} {self.model}: {learned.learned[-1]}; its reply used as it came")
            call.endpoint_rules = self.rules.to_json()

    def _learn(self, message: str, param: str | None) -> str | None:
        """Apply what a 400 says about a refused parameter; the one line that says so, or None."""
        with self._rules_lock:
            learned = lesson(self.rules, message, param)
            if learned is None:
                return None
            self.rules = learned
        return f"{self.base_url} {self.model}: {learned.learned[-1]}; sent again"

    def _fill(self, call: LLMCall, reply: Reply, cuts: Cuts) -> tuple[LLMCall, list[str | None]]:
        """Texts, thoughts, usage and cost; a reply without choices is an endpoint fault."""
        usage = reply.usage
        if usage is None:
            estimate = Usage(prompt_tokens=_prompt_estimate(call.request), completion_tokens=reply.estimated_tokens)
            call.notes.append("the endpoint reported no usage: tokens estimated")
            usage = estimate
        call.prompt_tokens = usage.prompt_tokens * (1 + cuts.count)
        call.completion_tokens = usage.billed_output + cuts.output_tokens
        call.reasoning_tokens = usage.reasoning_tokens or sum(len(t) for t in reply.thoughts) // 4
        call.cost_usd = call_cost(self.model, call.prompt_tokens, call.completion_tokens, self.prices)
        call.response_texts = list(reply.answers)
        # Foreign text, shown by `candidates show`: sanitized once here (the answers are code, never rewritten).
        call.reasoning_texts = [clean(reasoning.capped(t), 2 * reasoning.REASONING_CAP, True) for t in reply.thoughts]
        if not reply.answers:
            call.error = "the endpoint returned no choices"
        return call, list(reply.finish_reasons)

    def _failed(self, call: LLMCall, error: str, start: float, cuts: Cuts) -> tuple[LLMCall, list[str | None]]:
        """A call that got no reply; what cut streams delivered is still counted (and paid)."""
        call.error = _one_line(error)
        call.latency_s = time.monotonic() - start
        if cuts.count:
            call.prompt_tokens = _prompt_estimate(call.request) * cuts.count
            call.completion_tokens = cuts.output_tokens
            call.cost_usd = call_cost(self.model, call.prompt_tokens, call.completion_tokens, self.prices)
        return call, []

    def backoff_delay(self, attempt: int, exc: Exception | None = None) -> float:
        """Exponential from backoff_base_s with up to 50% jitter, at least any Retry-After, capped."""
        delay = min(self.backoff_cap_s, self.backoff_base_s * 2 ** (attempt - 1))
        delay += random.uniform(0, delay / 2)
        delay = max(delay, retry_after(exc))
        return min(self.backoff_cap_s, delay)


def _prompt_estimate(request: dict[str, Any]) -> int:
    """About 4 characters per token: for accounting where the endpoint reported nothing."""
    return max(1, sum(len(str(m.get("content", ""))) for m in request.get("messages", [])) // 4)


def _empty(cut: StreamCut) -> bool:
    """A stream that ended cleanly without one event: the endpoint may not stream at all."""
    return cut.cause is None and not cut.timed_out and not cut.partial.answers and not cut.partial.chunks


def _cause(cut: StreamCut) -> str:
    cause = cut.cause
    return _one_line(f"{type(cause).__name__}: {cause}") if cause is not None else "the stream ended early"


def _error_fields(exc: openai.APIStatusError) -> tuple[str, str | None, str | None]:
    """(message, param, code) of an error body in OpenAI's shape (or a list of them, as some endpoints send)."""
    body_ = exc.body
    if isinstance(body_, list) and body_:
        body_ = body_[0]
    inner = body_.get("error", body_) if isinstance(body_, dict) else None
    if isinstance(inner, dict):
        param, code = inner.get("param"), inner.get("code")
        return str(inner.get("message") or exc), str(param) if param else None, str(code) if code else None
    return _error_message(exc), None, None


def _validate(**options: Any) -> None:
    """Reject nonsense settings up front, in one line naming the option."""
    if not options["base_url"] or not str(options["base_url"]).startswith(("http://", "https://")):
        raise ProviderConfigError(
            f"base URL {options['base_url']!r} must start with http:// or https:// (e.g. https://api.openai.com/v1)"
        )
    if not options["model"]:
        raise ProviderConfigError("no model name: pass --model (e.g. gpt-5-mini)")
    if not options["api_key"]:
        raise ProviderConfigError(f"no API key: set {API_KEY_ENV} or pass --api-key-file FILE")
    checks = {
        "temperature": options["temperature"] >= 0,
        "n": options["n"] >= 1,
        "max_tokens": options["max_tokens"] >= 1,
        "request_timeout": options["request_timeout"] > 0,
        "max_retries": options["max_retries"] >= 0,
    }
    if options["reasoning_effort"] not in (None, *REASONING_EFFORTS):
        raise ProviderConfigError(
            f"reasoning_effort={options['reasoning_effort']!r}: use one of {', '.join(REASONING_EFFORTS)}"
        )
    for option, ok in checks.items():
        if not ok:
            raise ProviderConfigError(f"{option}={options[option]!r} is out of range")


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
        return _one_line(f"HTTP {exc.status_code}: {_error_fields(exc)[0]}{hint}")
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
