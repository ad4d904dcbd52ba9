"""The CPU budget rule on its own: with no cpuset to pin the sandbox, a candidate that runs work on
a core beyond its thread budget is rejected with the numbers (issue 11 class B)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adversarial.common import all_fixtures, run_fixture
from kernel_agent.evaluate.sandbox.control import cgroup_root

FIXTURES = {f.name: f for f in all_fixtures()}


@pytest.mark.skipif(cgroup_root() is None, reason="exact CPU accounting needs a cgroup v2 folder on this machine")
@pytest.mark.parametrize("name", ["b61_pool_second_core", "b61_within_slack"])
def test_a_second_core_is_named_when_nothing_pins_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("KERNEL_AGENT_NO_CGROUP_V1", "cpuset")
    verdict = run_fixture(FIXTURES[name], tmp_path / "sandbox", timing_rounds=10)
    assert verdict.status == "rejected", f"{verdict.status}: {verdict.reason}"
    assert "thread(s) allow" in verdict.reason
