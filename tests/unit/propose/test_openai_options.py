"""The openai provider's options are declared once, by the provider: the stored plan, the command line and the
provider's own defaults all read that one declaration."""

from __future__ import annotations

import inspect
import subprocess
import sys
from dataclasses import fields

from kernel_agent.optimize.config import ProviderConfig, RunPlan
from kernel_agent.propose.openai_chat import OpenAIProvider
from kernel_agent.propose.openai_options import DEFAULTS, OpenAIOptions, ReasoningEffort


def test_the_plan_stores_the_providers_declared_options_then_replays_own() -> None:
    declared = [f.name for f in fields(OpenAIOptions)]
    assert [f.name for f in fields(ProviderConfig)] == [*declared, "replay_run"]
    stored = RunPlan().to_json()["provider_options"]
    assert list(stored) == [*declared, "replay_run"] and stored["model"] == DEFAULTS.model


def test_the_provider_takes_its_defaults_from_the_declaration() -> None:
    defaults = {name: p.default for name, p in inspect.signature(OpenAIProvider).parameters.items()}
    assert defaults["temperature"] == DEFAULTS.temperature and defaults["max_tokens"] == DEFAULTS.tokens_per_reply
    assert defaults["request_timeout"] == DEFAULTS.request_timeout and defaults["max_retries"] == DEFAULTS.max_retries
    assert defaults["stream"] is DEFAULTS.stream


def test_the_arguments_name_what_the_provider_accepts() -> None:
    options = OpenAIOptions(model="m", reasoning_effort=ReasoningEffort.HIGH, tokens_per_reply=99)
    arguments = options.arguments(samples=3, rules=None)
    accepted = set(inspect.signature(OpenAIProvider).parameters) | {
        "api_key_file",
        "prices_file",
    }  # read by the factory
    assert set(arguments) <= accepted
    assert arguments["max_tokens"] == 99 and arguments["n"] == 3 and arguments["reasoning_effort"] == "high"


def test_a_plan_loads_without_the_openai_package() -> None:
    """The GPU machine has no `openai`: reading the plan's options must not import it."""
    code = "import sys; import kernel_agent.optimize.config; sys.exit('openai' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
