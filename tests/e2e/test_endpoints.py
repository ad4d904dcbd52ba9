"""Conformance: the openai provider against each endpoint profile (endpoint_profiles.py) through the real SDK
over HTTP, then a whole `optimize` per profile that must reach a verified candidate.

No test here calls a paid endpoint: the profiles play each vendor's documented behaviour on 127.0.0.1.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import CANDIDATES, SOFTMAX, run_cli
from endpoint_profiles import THOUGHT, Profile, profiles
from scripted_server import ScriptedServer

from kernel_agent.problem.load import load_problem
from kernel_agent.propose.base import Attempt, ProposalContext
from kernel_agent.propose.openai_chat import OpenAIProvider
from kernel_agent.propose.prices import DEFAULT_PRICES, call_cost

GOOD_MODULE = (CANDIDATES / "faster.py").read_text()
GOOD_REPLY = f"Use float32 and one pass.\n\n```python\n{GOOD_MODULE}```\n"
RETURNS_THOUGHT = {"vllm-reasoning", "deepseek-r1-inline", "deepseek-r1-no-open", "google", "ollama", "kimi", "gpt-oss"}


@pytest.fixture(scope="module")
def problem():
    return load_problem(SOFTMAX)


def context(problem, samples: int = 1, history: list[Attempt] | None = None) -> ProposalContext:
    return ProposalContext(
        problem=problem,
        baseline_source=problem.baseline_source,
        parents=[],
        history=history or [],
        profile={},
        round=1,
        samples=samples,
        device="cpu",
    )


def provider(server: ScriptedServer, model: str, slept: list[float] | None = None, **overrides) -> OpenAIProvider:
    options = {"base_url": server.base_url, "model": model, "api_key": "test-key", "max_retries": 2}
    options |= {"backoff_base_s": 0.01, "backoff_cap_s": 2.0, "request_timeout": 10.0}
    return OpenAIProvider(**{**options, **overrides}, sleep=(slept.append if slept is not None else lambda s: None))


@pytest.mark.parametrize("name", sorted(profiles()))
def test_every_profile_yields_the_answer_and_never_the_draft_in_the_thought(problem, name: str) -> None:
    profile = profiles()[name]
    with ScriptedServer([GOOD_REPLY] * 4, profile=profile) as server:
        batch = provider(server, profile.model).propose(context(problem, samples=2))
    assert [p.source for p in batch.proposals] == [GOOD_MODULE, GOOD_MODULE], [p.parse_error for p in batch.proposals]
    assert all(call.error is None for call in batch.calls)
    thoughts = [t for call in batch.calls for t in call.reasoning_texts]
    if name in RETURNS_THOUGHT:
        assert thoughts and all(THOUGHT.split("```")[0].strip() in t for t in thoughts), thoughts
        assert all("return x * 0" not in text for call in batch.calls for text in call.response_texts)
    else:
        assert not any(thoughts)


def test_gpt5_is_asked_right_the_first_time_and_its_reasoning_is_billed(problem) -> None:
    profile = profiles()["openai-reasoning"]
    with ScriptedServer([[GOOD_REPLY, GOOD_REPLY]], profile=profile) as server:
        batch = provider(server, "gpt-5").propose(context(problem, samples=2))
        sent = server.requests
    assert len(sent) == 1 and "max_tokens" not in sent[0] and "temperature" not in sent[0]
    assert sent[0]["max_completion_tokens"] == 8192 and sent[0]["stream"] is True
    call = batch.calls[0]
    assert call.reasoning_tokens == 80 and call.lessons == [] and call.attempts == 1
    assert call.completion_tokens > call.reasoning_tokens  # reasoning inside completion_tokens: counted once
    expected = call_cost("gpt-5", call.prompt_tokens, call.completion_tokens, DEFAULT_PRICES)
    assert call.cost_usd == pytest.approx(expected) and expected > 0


def test_an_unknown_reasoning_model_is_learned_from_its_400s_once_for_the_run(problem) -> None:
    profile = profiles()["openai-unknown-reasoner"]
    with ScriptedServer([GOOD_REPLY] * 3, profile=profile) as server:
        openai_provider = provider(server, profile.model)
        first = openai_provider.propose(context(problem))
        second = openai_provider.propose(context(problem))
        sent = server.requests
    assert [sorted(k for k in r if k in ("max_tokens", "max_completion_tokens", "temperature")) for r in sent] == [
        ["max_tokens", "temperature"],
        ["max_completion_tokens", "temperature"],
        ["max_completion_tokens"],
        ["max_completion_tokens"],  # the second round sends what the run learned: no 400 again
    ]
    call = first.calls[0]
    assert call.attempts == 3 and call.error is None and first.proposals[0].source == GOOD_MODULE
    assert [line.split(": ", 1)[1] for line in call.lessons] == [
        "sends max_completion_tokens instead of max_tokens; sent again",
        "omits temperature (the endpoint refused its value); sent again",
    ]
    assert call.endpoint_rules["token_param"] == "max_completion_tokens"
    assert second.calls[0].attempts == 1 and second.calls[0].lessons == []


def test_anthropic_takes_one_reply_per_request(problem) -> None:
    with ScriptedServer([GOOD_REPLY] * 3, profile=profiles()["anthropic"]) as server:
        batch = provider(server, "claude-sonnet-4-5").propose(context(problem, samples=2))
        sent = server.requests
    assert [r["n"] for r in sent] == [2, 1, 1]
    assert batch.calls[0].lessons[0].endswith("asks for one reply (n=1); sent again") and len(batch.proposals) == 2


def test_reasoning_counted_beside_completion_tokens_is_billed_as_output(problem) -> None:
    with ScriptedServer([GOOD_REPLY], profile=profiles()["google"]) as server:
        batch = provider(server, "gemini-2.5-flash", reasoning_effort="high").propose(context(problem))
        sent = server.requests
    call = batch.calls[0]
    assert sent[0]["reasoning_effort"] == "high" and call.reasoning_tokens == 40
    reported = len(profiles()["google"].message(GOOD_REPLY)["content"]) // 4  # completion_tokens, thought left out
    assert call.completion_tokens == reported + 40  # the 40 reasoning tokens billed as output on top


def test_an_error_body_sent_as_a_list_is_still_read(problem) -> None:
    profile = Profile("list-errors", "m", single_choice="refuse", errors_as_list=True)
    with ScriptedServer([GOOD_REPLY] * 2, profile=profile) as server:
        batch = provider(server, "m").propose(context(problem, samples=2))
    assert batch.calls[0].lessons and len(batch.proposals) == 2


def test_a_400_for_another_reason_is_one_clear_line_and_not_sent_again(problem) -> None:
    with ScriptedServer([{"status": 400, "message": "messages: field required"}, GOOD_REPLY]) as server:
        batch = provider(server, "gpt-4o-mini").propose(context(problem))
        assert server.request_count == 1
    assert batch.calls[0].error == "HTTP 400: messages: field required (not retried)" and batch.proposals == []


def test_a_rate_limit_waits_its_retry_after(problem) -> None:
    slept: list[float] = []
    with ScriptedServer([GOOD_REPLY], profile=profiles()["rate-limited"]) as server:
        batch = provider(server, "gpt-4o-mini", slept).propose(context(problem))
    assert batch.calls[0].attempts == 2 and slept and slept[0] >= 1.0 and batch.proposals[0].source == GOOD_MODULE


def test_a_context_length_refusal_cuts_the_reply_room_to_fit(problem) -> None:
    with ScriptedServer([GOOD_REPLY] * 2, profile=profiles()["context-limited"]) as server:
        fitted = provider(server, "small-context")
        batch = fitted.propose(context(problem))
        again = fitted.propose(context(problem))  # the next round starts from the room that fit
        sent = server.requests
    assert [r["max_tokens"] for r in sent][0] == 8192 and len(sent) == 3
    assert again.calls[0].attempts == 1 and sent[2]["max_tokens"] == sent[1]["max_tokens"]
    prompt = sum(len(m["content"]) for m in sent[1]["messages"]) // 4
    assert prompt + sent[1]["max_tokens"] <= 2000 and sent[1]["max_tokens"] >= 256
    assert batch.calls[0].attempts == 2 and "(2000 tokens)" in batch.calls[0].notes[0]


def test_a_prompt_over_the_context_leaves_the_oldest_attempts_out(problem) -> None:
    history = [Attempt(i, GOOD_MODULE, "incorrect", f"mismatch {i}: " + "x" * 300, None, round=i) for i in range(8)]
    profile = Profile("context-1800", "small-context", context_tokens=1800)
    with ScriptedServer([GOOD_REPLY], profile=profile) as server:
        batch = provider(server, "small-context").propose(context(problem, history=history))
        sent = server.requests
    sizes = [sum(len(m["content"]) for m in r["messages"]) // 4 for r in sent]
    assert sizes[0] > 1800 - 256 and sizes == sorted(sizes, reverse=True)
    assert sizes[-1] + sent[-1]["max_tokens"] <= 1800
    call = batch.calls[0]
    assert call.error is None and call.attempts == len(sent) and "oldest attempt" in call.notes[0]
    last_prompt = sent[-1]["messages"][1]["content"]
    assert "mismatch 7" in last_prompt and "mismatch 0" not in last_prompt


def test_a_prompt_that_never_fits_is_one_clear_error(problem) -> None:
    with ScriptedServer([GOOD_REPLY], profile=Profile("tiny", "tiny", context_tokens=300)) as server:
        batch = provider(server, "tiny").propose(context(problem))
    call = batch.calls[0]
    assert batch.proposals == [] and "does not fit the model's context" in call.error and "\n" not in call.error


def test_a_stream_cut_mid_reply_is_paid_once_retried_and_recorded(problem) -> None:
    with ScriptedServer([GOOD_REPLY, GOOD_REPLY], profile=profiles()["stream-cut"]) as server:
        batch = provider(server, "gpt-4o-mini").propose(context(problem))
    call = batch.calls[0]
    whole = len(GOOD_REPLY) // 4
    assert call.error is None and call.attempts == 2 and "the stream was cut after ~" in call.notes[0]
    assert whole < call.completion_tokens < whole + 20  # the cut reply's few tokens, once
    assert batch.proposals[0].source == GOOD_MODULE


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8"])
def test_a_server_that_ignores_stream_is_read_whole_and_asked_whole_from_then_on(problem, content_type) -> None:
    """An endpoint that answers a streamed request with one whole JSON body: that body is the reply (no retry, its
    tokens counted once), the provider learns it does not stream, and its next request asks for the reply whole."""
    profile = Profile("ignores", "llama-3.1-8b-instruct", ignores_stream=content_type)
    with ScriptedServer([GOOD_REPLY] * 3, profile=profile) as server:
        chat = provider(server, profile.model)
        first = chat.propose(context(problem))
        second = chat.propose(context(problem))
        sent = server.requests
    call = first.calls[0]
    assert call.error is None and call.attempts == 1, (call.error, call.notes)
    assert first.proposals[0].source == GOOD_MODULE and second.proposals[0].source == GOOD_MODULE
    assert call.completion_tokens == len(GOOD_REPLY) // 4  # the server's usage, once: nothing cut, nothing estimated
    assert any("does not stream" in lesson for lesson in call.lessons) and not second.calls[0].lessons
    assert call.endpoint_rules["stream"] is False
    assert [bool(body.get("stream")) for body in sent] == [True, False]


def test_a_stream_without_a_single_event_names_no_stream_as_the_fix(problem) -> None:
    """A whole body served as something neither JSON nor an event stream reads as no events at all: after the
    retries, the error says so and names --no-stream (not the URL or the key)."""
    profile = Profile("plain", "gpt-4o-mini", ignores_stream="text/plain")
    with ScriptedServer([GOOD_REPLY] * 3, profile=profile) as server:
        batch = provider(server, profile.model, max_retries=1).propose(context(problem))
    call = batch.calls[0]
    assert call.error is not None and "no stream events" in call.error and "--no-stream" in call.error, call.error
    assert call.attempts == 2


def test_the_deadline_covers_a_whole_slow_stream(problem) -> None:
    slow = {"chunk_delay": 0.05, "reply": GOOD_REPLY}
    with ScriptedServer([slow, slow], profile=None) as server:
        batch = provider(server, "gpt-4o-mini", request_timeout=0.5, max_retries=1).propose(context(problem))
    call = batch.calls[0]
    assert call.error is not None and "timed out after 0.5 s" in call.error and call.attempts == 2
    assert call.completion_tokens > 0  # what streamed before each cut is counted


# --- one whole optimize per profile ----------------------------------------------------------------------------


def profile_kernels(root: Path, names: list[str]) -> list[Path]:
    """One copy of the softmax fixture per profile, named after it (a run keeps one row per kernel name)."""
    folders = []
    for name in names:
        folder = root / name.replace("-", "_")
        folder.mkdir(parents=True)
        for file in ("problem.py", "kernel.py"):
            (folder / file).write_text((SOFTMAX / file).read_text())
        folders.append(folder)
    return folders


@pytest.mark.slow
def test_optimize_reaches_a_verified_candidate_on_every_profile(tmp_path: Path) -> None:
    """One run of the optimize loop (BatchRun, as `optimize` drives it) with one kernel per profile, each kernel's
    provider talking to its own endpoint: every kernel's LLM candidate is verified (`faster`, `correct` or
    `flagged`: it passed every check; the short timing here settles no speedup claim), each thought is stored
    apart, the unknown reasoner's lesson reaches the progress display once and the run's stored rules."""
    from contextlib import ExitStack

    from kernel_agent.core.config import ReferenceConfig
    from kernel_agent.db.session import open_database
    from kernel_agent.memo.ceilings import device_ceilings
    from kernel_agent.optimize.config import KernelSpec, RunPlan, SearchConfig
    from kernel_agent.optimize.executors.local import LocalExecutor
    from kernel_agent.optimize.run import BatchRun, load_kernel, store_plan

    names = sorted(profiles())
    plan = RunPlan(provider="openai", search=SearchConfig(proposal_rounds=1, samples=1, retime_best=False))
    plan.kernels = [KernelSpec(path=str(p)) for p in profile_kernels(tmp_path / "kernels", names)]
    plan.references = ReferenceConfig(references=False)
    plan.evaluation.threads, plan.evaluation.sandbox_root, plan.evaluation.timing_rounds = 1, tmp_path / "box", 4
    database = open_database(str(tmp_path / "runs.db"))
    problems = [(spec, load_kernel(spec)) for spec in plan.kernels]
    events: list[tuple[str, dict]] = []
    with ExitStack() as stack:
        providers, servers = {}, {}
        for name, (_, problem) in zip(names, problems):
            profile = profiles()[name]
            servers[name] = stack.enter_context(ScriptedServer([GOOD_REPLY] * 3, profile=profile))
            providers[problem.name] = provider(servers[name], profile.model)
        run_id = store_plan(database, plan)
        ceilings = device_ceilings(database, {"cpu"}, 1, remeasure=False)
        executor = LocalExecutor(2)
        batch = BatchRun(
            database, run_id, plan, problems, providers, executor, lambda *e: events.append(e), ceilings=ceilings
        )
        results = batch.run()
        executor.shutdown()
    assert len(results) == len(names)
    with sqlite3.connect(tmp_path / "runs.db") as db:
        verdicts = dict(
            db.execute(
                "SELECT p.name, e.status || ' ' || e.correct FROM candidates c "
                "JOIN evaluations e ON e.candidate_id = c.id JOIN problems p ON p.id = c.problem_id "
                "WHERE c.origin = 'openai'"
            ).fetchall()
        )
        thoughts = dict(
            db.execute(
                "SELECT p.name, l.reasoning FROM llm_calls l JOIN run_kernels k ON k.id = l.run_kernel_id "
                "JOIN problems p ON p.id = k.problem_id"
            ).fetchall()
        )
        (rules,) = db.execute(f"SELECT endpoint_rules FROM runs WHERE id = {run_id}").fetchone()
    for name, result in zip(names, results):
        kernel = name.replace("-", "_")
        assert verdicts.get(kernel) in ("faster 1", "correct 1", "flagged 1"), (name, verdicts.get(kernel), result)
        assert ("Let me think" in (thoughts[kernel] or "")) == (name in RETURNS_THOUGHT), name
    lessons = [data["text"] for kind, data in events if kind == "note"]
    assert len([t for t in lessons if "sends max_completion_tokens instead of max_tokens" in t]) == 1, lessons
    reasoner = servers["openai-unknown-reasoner"]
    assert json.loads(rules)[f"{reasoner.base_url} my-reasoner-2027"]["dropped"] == ["temperature"]
    with sqlite3.connect(tmp_path / "runs.db") as db:
        (vllm_candidate,) = db.execute(
            "SELECT c.id FROM candidates c JOIN problems p ON p.id = c.problem_id "
            "WHERE c.origin = 'openai' AND p.name = 'vllm_reasoning'"
        ).fetchone()
    folded = run_cli("candidates", "show", str(vllm_candidate), "--db", str(tmp_path / "runs.db"))
    shown = run_cli("candidates", "show", str(vllm_candidate), "--db", str(tmp_path / "runs.db"), "--reasoning")
    assert "--reasoning shows it" in folded.stdout and "Let me think" not in folded.stdout
    assert "Let me think" in shown.stdout


@pytest.mark.slow
def test_optimize_model_gpt5_on_the_openai_reasoning_profile_needs_no_flag(tmp_path: Path) -> None:
    """The issue's case through the real CLI: `--model gpt-5` and nothing else reaches a verified candidate;
    `runs show` prints its reasoning tokens and dollars per verified win."""
    with ScriptedServer([GOOD_REPLY] * 2, profile=profiles()["openai-reasoning"]) as server:
        proc = run_cli(
            "optimize",
            str(SOFTMAX),
            "--db",
            str(tmp_path / "runs.db"),
            "--sandbox",
            str(tmp_path / "sandbox"),
            "--threads",
            "1",
            "--rounds",
            "1",
            "--samples",
            "1",
            "--json",
            *server.provider_args("gpt-5"),
            env={"OPENAI_API_KEY": "sk-test-not-a-real-key"},
        )
        sent = server.requests
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(sent) == 1 and "max_completion_tokens" in sent[0] and "temperature" not in sent[0]
    result = json.loads(proc.stdout)
    with sqlite3.connect(tmp_path / "runs.db") as db:
        status, correct = db.execute(
            "SELECT e.status, e.correct FROM candidates c JOIN evaluations e ON e.candidate_id = c.id "
            "WHERE c.origin = 'openai'"
        ).fetchone()
    assert correct == 1 and status in ("faster", "correct", "flagged"), (status, result)  # verified; the speed is load
    run = str(result["run_id"])
    shown = json.loads(run_cli("runs", "show", run, "--db", str(tmp_path / "runs.db"), "--json").stdout)["llm"]
    assert shown["reasoning_tokens"] == 40 and shown["cost_usd"] > 0
    assert shown["verified_wins"] == (status == "faster")
    text = run_cli("runs", "show", run, "--db", str(tmp_path / "runs.db")).stdout
    if status == "faster":
        assert shown["usd_per_win"] == pytest.approx(shown["cost_usd"])
        assert "1 verified win: $" in text and "tokens per win" in text
    else:
        assert "no verified win yet" in text


def test_a_resumed_run_starts_from_what_its_endpoint_was_taught(problem, tmp_path: Path) -> None:
    """The rules learned in a first sitting are stored with the run; a provider built from them (as `--resume`
    builds it) sends the accepted request first, with no 400 to learn from again."""
    from kernel_agent.db import writes as store
    from kernel_agent.db.session import open_database

    profile = profiles()["openai-unknown-reasoner"]
    database = open_database(str(tmp_path / "runs.db"))
    run_id = store.create_run(database, "openai", profile.model, {})
    with ScriptedServer([GOOD_REPLY] * 2, profile=profile) as server:
        first = provider(server, profile.model).propose(context(problem))
        for call in first.calls:
            store.add_llm_call(database, call, run_id, None, 1)
        learned = store.endpoint_rules(database, run_id, server.base_url, profile.model)
        again = provider(server, profile.model, rules=learned).propose(context(problem))
        sent = server.requests
    assert learned is not None and learned["token_param"] == "max_completion_tokens"
    assert len(sent) == 4 and "max_completion_tokens" in sent[3] and "temperature" not in sent[3]
    assert again.calls[0].attempts == 1 and again.calls[0].lessons == []
