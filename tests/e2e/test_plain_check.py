"""The export's last check: the winner runs once more in a plain process of the user's, outside the sandbox,
and is refused there if it is wrong (issue 31 D: code that is honest only while it is evaluated)."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import CANDIDATES, EXAMPLES, SOFTMAX

from kernel_agent.export.plain_check import plain_check
from kernel_agent.export.user_process import user_env
from kernel_agent.problem.load import load_problem

AWARE = Path(__file__).parents[1] / "adversarial" / "fixtures" / "w3d_sandbox_aware.py"


def test_an_honest_winner_passes_in_a_plain_process() -> None:
    assert plain_check(load_problem(SOFTMAX), (CANDIDATES / "faster.py").read_text(), "cpu", 120) is None


def test_code_that_is_honest_only_in_the_sandbox_is_refused_outside_it() -> None:
    reason = plain_check(load_problem(SOFTMAX), AWARE.read_text(), "cpu", 120)
    assert reason is not None and reason.startswith("in a plain process (outside the sandbox) it is wrong")


def test_a_cpp_winner_builds_and_passes_in_a_plain_process() -> None:
    problem = EXAMPLES / "cpp_softmax"
    assert plain_check(load_problem(problem), (problem / "candidates" / "faster.py").read_text(), "cpu", 300) is None


def test_a_crash_and_a_hang_outside_the_sandbox_are_reasons() -> None:
    crash = "import os\n\n\ndef kernel(x):\n    os._exit(3)\n"
    assert "failed (exit 3)" in plain_check(load_problem(SOFTMAX), crash, "cpu", 60)
    hang = "def kernel(x):\n    while True:\n        pass\n"
    assert "did not finish within 5 s" in plain_check(load_problem(SOFTMAX), hang, "cpu", 5)


def test_the_plain_process_gets_no_kernel_agent_variable_and_no_secret(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("KERNEL_AGENT_BUILD_STORE", "/x")
    monkeypatch.setenv("GITHUB_TOKEN", "t")
    monkeypatch.setenv("_", "/venv/bin/kernel-agent")  # what bash sets: the command that started the tool
    env = user_env(tmp_path)
    assert not {"OPENAI_API_KEY", "KERNEL_AGENT_BUILD_STORE", "GITHUB_TOKEN", "_"} & set(env)
    assert env["PATH"] == os.environ["PATH"] and env["HOME"] == str(tmp_path)
