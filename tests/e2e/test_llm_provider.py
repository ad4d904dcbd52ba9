"""The LLM side end to end: prompts, reply parsing, and the openai provider through the real SDK.

Every provider test talks HTTP to `ScriptedServer` (a real local endpoint), so
retries, error bodies and usage go through the same code paths as production.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict
from pathlib import Path

import pytest
from scripted_server import NO_MORE_REPLIES, ScriptedServer

from kernel_agent.problem.load import load_problem
from kernel_agent.propose.base import Attempt, LLMCall, ProposalContext
from kernel_agent.propose.openai_chat import (
    DEFAULT_PRICES,
    OpenAIProvider,
    ProviderConfigError,
    call_cost,
    load_prices,
    prompt_hash,
    resolve_api_key,
)
from kernel_agent.propose.parse import extract_candidate
from kernel_agent.propose.prompts import render_messages
from kernel_agent.propose.replay import ReplayProvider

ROOT = Path(__file__).resolve().parents[2]
CPP_SOFTMAX = ROOT / "examples" / "cpp_softmax"
GOOD_MODULE = (CPP_SOFTMAX / "candidates" / "faster.py").read_text()
GOOD_REPLY = f"Use float math and two threads.\n\n```python\n{GOOD_MODULE}```\n"
COMPILE_ERROR = "kernel.cpp:14:5: error: 'exp2ff' was not declared in this scope"
PROFILE = {
    "baseline_ms": 3.2109,
    "baseline_p20_ms": 3.1,
    "baseline_p80_ms": 3.35,
    "flops": 4194304,
    "bytes": 8388608,
    "achieved_gbps": 2.61,
    "bound": "memory",
    "roofline_fraction": 0.042,
}


@pytest.fixture(scope="module")
def problem():
    return load_problem(CPP_SOFTMAX)


def make_context(
    problem,
    history: list[Attempt] | None = None,
    samples: int = 1,
    cache: dict[str, LLMCall] | None = None,
    profile: dict | None = None,
) -> ProposalContext:
    cache = cache if cache is not None else {}
    return ProposalContext(
        problem=problem,
        baseline_source=problem.baseline_source,
        parents=[],
        history=history or [],
        profile=PROFILE if profile is None else profile,
        round=1,
        samples=samples,
        device="cpu",
        cache_lookup=cache.get,
    )


def make_provider(server: ScriptedServer, **overrides) -> OpenAIProvider:
    options = {"base_url": server.base_url, "model": "gpt-4o-mini", "api_key": "test-key", "max_retries": 3}
    options |= {"backoff_base_s": 0.01, "backoff_cap_s": 0.05, "request_timeout": 5.0}
    return OpenAIProvider(**{**options, **overrides})


# --- the provider against the scripted endpoint -------------------------------------------------


def test_good_reply_becomes_a_proposal(problem):
    with ScriptedServer([GOOD_REPLY]) as server:
        batch = make_provider(server).propose(make_context(problem))
        sent = server.requests
    assert len(batch.proposals) == 1 and len(batch.calls) == 1
    proposal, call = batch.proposals[0], batch.calls[0]
    assert proposal.source == GOOD_MODULE
    assert proposal.parse_error is None and proposal.origin == "openai" and proposal.llm_call_index == 0
    assert proposal.note == "Use float math and two threads."
    assert call.error is None and call.attempts == 1 and not call.cached
    assert call.prompt_tokens > 100 and call.completion_tokens > 50 and call.latency_s > 0
    assert (
        call.cost_usd
        == pytest.approx(call_cost("gpt-4o-mini", call.prompt_tokens, call.completion_tokens, DEFAULT_PRICES))
        and call.cost_usd > 0
    )
    assert call.response_texts == [GOOD_REPLY]
    assert sent[0]["model"] == "gpt-4o-mini" and sent[0]["n"] == 1 and sent[0]["messages"] == call.request["messages"]
    assert call.prompt_hash == prompt_hash(call.request)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I would vectorize the inner loop with AVX2.", "no fenced code block in the reply"),
        ("```python\ndef kernel(x)\n    return x\n```", "code does not parse: SyntaxError"),
        ("```python\ndef softmax(x):\n    return x\n```", "code defines no `kernel`"),
    ],
)
def test_bad_replies_become_parse_errors(problem, reply, reason):
    with ScriptedServer([reply]) as server:
        batch = make_provider(server).propose(make_context(problem))
    assert len(batch.proposals) == 1
    assert batch.proposals[0].source is None
    assert reason in batch.proposals[0].parse_error
    assert batch.calls[0].error is None


def test_several_choices_and_top_up_when_the_endpoint_returns_fewer(problem):
    with ScriptedServer([[GOOD_REPLY], [GOOD_REPLY, "no code"]]) as server:
        batch = make_provider(server).propose(make_context(problem, samples=3))
        sent = server.requests
    assert [r["n"] for r in sent] == [3, 2]
    assert [p.llm_call_index for p in batch.proposals] == [0, 1, 1]
    assert [p.source is not None for p in batch.proposals] == [True, True, False]


def test_429_then_success_is_retried(problem):
    with ScriptedServer([{"status": 429}, GOOD_REPLY]) as server:
        batch = make_provider(server).propose(make_context(problem))
        assert server.request_count == 2
    assert len(batch.calls) == 1
    assert batch.calls[0].attempts == 2 and batch.calls[0].error is None
    assert batch.proposals[0].source == GOOD_MODULE


def test_timeout_is_retried(problem):
    with ScriptedServer([{"sleep": 1.0, "reply": GOOD_REPLY}, GOOD_REPLY]) as server:
        batch = make_provider(server, request_timeout=0.3).propose(make_context(problem))
        assert server.request_count == 2
    assert batch.calls[0].attempts == 2 and batch.calls[0].error is None


def test_permanent_500_is_recorded_not_raised(problem):
    with ScriptedServer([{"status": 500, "message": "upstream exploded"}] * 10) as server:
        batch = make_provider(server, max_retries=2).propose(make_context(problem))
        assert server.request_count == 3
    assert batch.proposals == []
    assert len(batch.calls) == 1
    call = batch.calls[0]
    assert call.attempts == 3 and call.response_texts == []
    assert "HTTP 500" in call.error and "upstream exploded" in call.error and "gave up after 3 attempts" in call.error
    assert "\n" not in call.error


def test_other_4xx_fails_at_once(problem):
    with ScriptedServer([{"status": 401, "message": "bad key"}, GOOD_REPLY]) as server:
        batch = make_provider(server).propose(make_context(problem))
        assert server.request_count == 1
    assert batch.proposals == [] and "HTTP 401" in batch.calls[0].error and "not retried" in batch.calls[0].error


def test_unreachable_endpoint_is_recorded_not_raised(problem):
    with ScriptedServer([]) as server:
        url = server.base_url
    provider = OpenAIProvider(
        base_url=url, model="m", api_key="k", max_retries=1, backoff_base_s=0.01, request_timeout=2
    )
    batch = provider.propose(make_context(problem))
    assert (
        batch.proposals == [] and "cannot reach the endpoint" in batch.calls[0].error and batch.calls[0].attempts == 2
    )


def test_cache_hit_makes_no_request(problem):
    cache: dict[str, LLMCall] = {}
    with ScriptedServer([GOOD_REPLY]) as server:
        provider = make_provider(server)
        first = provider.propose(make_context(problem, cache=cache))
        cache[first.calls[0].prompt_hash] = first.calls[0]
        assert server.request_count == 1
        again = provider.propose(make_context(problem, cache=cache))
        assert server.request_count == 1
    call = again.calls[0]
    assert call.cached and call.cost_usd == 0.0 and call.response_texts == [GOOD_REPLY]
    assert again.proposals[0].source == GOOD_MODULE


def test_empty_queue_answers_a_fixed_reply(problem):
    with ScriptedServer([]) as server:
        batch = make_provider(server).propose(make_context(problem))
    assert batch.calls[0].response_texts == [NO_MORE_REPLIES]
    assert batch.proposals[0].parse_error == "no fenced code block in the reply"


# --- prompts -------------------------------------------------------------------------------------


def failed_history() -> list[Attempt]:
    return [
        Attempt(1, GOOD_MODULE, "correct", "matches the reference", 1.01, note="THREADS=2", round=0),
        Attempt(2, GOOD_MODULE.replace("expf", "exp2ff"), "compile_error", COMPILE_ERROR, None, round=1),
    ]


def test_prompt_carries_reference_profile_and_the_compile_error(problem):
    system, user = render_messages(make_context(problem, history=failed_history()))
    assert system["role"] == "system" and user["role"] == "user"
    content = user["content"]
    assert problem.reference_source.strip() in content
    assert "3.211 ms" in content and "p20 3.1" in content and "p80 3.35" in content
    assert (
        "4.19 MFLOP" in content
        and "8.39 MB" in content
        and "2.61 GB/s" in content
        and "memory-bound" in content
        and "0.042" in content
    )
    assert COMPILE_ERROR in content
    assert content.index(COMPILE_ERROR) < content.index("## Reference")  # repair mode leads with the error
    assert "CPP_SOURCE" in content and "load_library" in content and "def kernel(x)" in content
    assert "1024x1024" in content and "float32" in content
    assert "```python" in system["content"]


def test_prompt_without_failures_optimizes_and_tolerates_odd_profiles(problem):
    history = [Attempt(7, GOOD_MODULE, "faster", "", 1.7, round=0)]
    profile = {"baseline_ms": {"median_ms": 2.0}, "bound": None, "weird": [1, {"a": float("nan")}], "flops": "unknown"}
    _, user = render_messages(make_context(problem, history=history, profile=profile))
    assert "## What went wrong" not in user["content"]
    assert "median 2 ms" in user["content"] and "1.70x" in user["content"] and "weird:" in user["content"]
    _, bare = render_messages(make_context(problem, profile={}))
    assert "## Profile" not in bare["content"] and "## Earlier attempts" not in bare["content"]


def test_history_is_most_recent_first_and_capped(problem):
    history = [Attempt(i, "x", "incorrect", f"mismatch number {i}", None, round=i) for i in range(20)]
    _, user = render_messages(make_context(problem, history=history))
    content = user["content"]
    assert "mismatch number 19" in content and "mismatch number 12" in content and "mismatch number 11" not in content
    assert content.index("mismatch number 19") < content.index("mismatch number 18")


def test_prompts_dir_overrides_one_template(problem, tmp_path):
    (tmp_path / "optimize.j2").write_text(
        "CUSTOM {{ problem.name }} {{ entry_point }}\n{% for line in profile_lines %}{{ line }}\n{% endfor %}"
    )
    with ScriptedServer([GOOD_REPLY]) as server:
        make_provider(server, prompts_dir=tmp_path).propose(make_context(problem))
        messages = server.requests[0]["messages"]
    assert messages[1]["content"].startswith("CUSTOM cpp_softmax kernel")
    assert messages[0]["content"] == render_messages(make_context(problem))[0]["content"]  # system.j2 fell back


def test_broken_override_template_is_a_config_error(problem, tmp_path):
    (tmp_path / "optimize.j2").write_text("{{ no_such_variable }}")
    with ScriptedServer([]) as server, pytest.raises(ProviderConfigError, match="optimize.j2"):
        make_provider(server, prompts_dir=tmp_path).propose(make_context(problem))


# --- replay, keys, prices -------------------------------------------------------------------------


def recorded(texts: list[str], index: int) -> LLMCall:
    return LLMCall(
        prompt_hash=f"h{index}",
        model="gpt-4o",
        base_url="http://recorded.invalid/v1",
        request={"n": len(texts)},
        response_texts=texts,
    )


def test_replay_returns_recorded_replies_in_order(problem, tmp_path):
    bad = "```python\ndef other():\n    pass\n```"
    provider = ReplayProvider([recorded([GOOD_REPLY], 0), recorded([bad, GOOD_REPLY], 1)])
    first = provider.propose(make_context(problem))
    second = provider.propose(make_context(problem))
    done = provider.propose(make_context(problem))
    assert [p.source for p in first.proposals] == [GOOD_MODULE] and first.calls[0].cached and not first.exhausted
    assert (
        second.proposals[0].parse_error == "code defines no `kernel` at top level"
        and second.proposals[1].source == GOOD_MODULE
    )
    assert second.calls[0].prompt_hash == "h1" and second.proposals[0].origin == "replay"
    assert done.exhausted and done.proposals == [] and done.calls == []
    saved = tmp_path / "calls.json"
    saved.write_text(json.dumps([asdict(recorded(["a"], 0))]))
    assert ReplayProvider.from_json(saved).propose(make_context(problem)).calls[0].response_texts == ["a"]


def test_missing_key_names_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderConfigError, match="OPENAI_API_KEY"):
        resolve_api_key(None)
    with pytest.raises(ProviderConfigError, match="OPENAI_API_KEY"):
        resolve_api_key(tmp_path / "missing.key")
    (tmp_path / "key").write_text("sk-from-file\n")
    assert resolve_api_key(tmp_path / "key") == "sk-from-file"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert resolve_api_key(None) == "sk-env"


def test_prices_from_toml(tmp_path):
    path = tmp_path / "prices.toml"
    path.write_text('[prices]\n"local-llama" = [0.5, 1.5]\n"gpt-4o" = [1, 2]\n')
    prices = load_prices(path)
    assert prices["local-llama"] == (0.5, 1.5) and prices["gpt-4o"] == (1.0, 2.0) and "gpt-4o-mini" in prices
    assert call_cost("local-llama", 1_000_000, 2_000_000, prices) == pytest.approx(3.5)
    assert call_cost("gpt-4o-mini-2024-07-18", 1_000_000, 0, prices) == pytest.approx(DEFAULT_PRICES["gpt-4o-mini"][0])
    assert call_cost("unknown-model", 10**6, 10**6, prices) == 0.0
    path.write_text('[prices]\n"x" = [1]\n')
    with pytest.raises(ProviderConfigError, match="prices"):
        load_prices(path)


# --- the parser on its own -------------------------------------------------------------------------


def test_parser_picks_the_last_module_that_defines_the_entry_point():
    reply = (
        "```python\ndef kernel(x):\n    return 1\n```\ntext\n```python\ndef kernel(x):\n    return 2\n```\n"
        "```python\ny = kernel(x)\n```"
    )
    source, reason = extract_candidate(reply, "kernel")
    assert reason is None and "return 2" in source
    source, _ = extract_candidate("```py\nclass ModelNew:\n    pass\n```", "ModelNew")
    assert source == "class ModelNew:\n    pass\n"
    assert extract_candidate("```cpp\nint main() {}\n```", "kernel")[1].startswith("no ```python code block")
    assert "line 2" in extract_candidate("```\nimport torch\ndef kernel(:\n```", "kernel")[1]
    assert "never closed" in extract_candidate("```python\ndef kernel(x):\n    return (", "kernel")[1]


def test_parser_never_raises_on_any_string():
    rng = random.Random(0)
    alphabet = [
        "```",
        "```python\n",
        "~~~",
        "\n",
        "def kernel(x):",
        " return x",
        "(",
        "\x00",
        "\r\n",
        "é",
        "    ",
        "class ",
        ":",
        "kernel = 1",
    ]
    for _ in range(2000):
        reply = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        source, reason = extract_candidate(reply, "kernel")
        assert (source is None) != (reason is None)
        assert reason is None or "\n" not in reason
    assert extract_candidate("(" * 100_000, "kernel")[0] is None
    assert extract_candidate(None, "kernel") == (None, "empty reply")  # type: ignore[arg-type]
