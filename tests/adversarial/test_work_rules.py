"""The CPU budget rule on its own: with no cpuset to pin the sandbox, a candidate that runs work on
a core beyond its thread budget is rejected with the numbers (issue 11 class B)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adversarial.common import all_fixtures, run_fixture
from kernel_agent.core.verdict import Verdict
from kernel_agent.sandbox.host.cgroups import cgroup_root

FIXTURES = {f.name: f for f in all_fixtures()}
ATTEMPTS = 3


def core_withheld(verdict: Verdict) -> bool:
    """The machine never let the hidden thread run beside the worker: its timed calls used no more CPU
    than wall time, so there was no second core to find (on a busy CI machine the other core was
    taken and the helper ran after the main thread, at one core's speed: 0.82x)."""
    if verdict.status != "correct" or not verdict.timing:
        return False
    timed = [p for p in verdict.timing.accounting.candidate.phases if p.name == "timed"]
    return not timed or timed[0].cpu_ms <= 1.02 * timed[0].wall_ms


@pytest.mark.skipif(cgroup_root() is None, reason="exact CPU accounting needs a cgroup v2 folder on this machine")
@pytest.mark.parametrize("name", ["b61_pool_second_core", "b61_within_slack"])
def test_a_second_core_is_named_when_nothing_pins_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv("KERNEL_AGENT_NO_CGROUP_V1", "cpuset")
    for attempt in range(ATTEMPTS):
        # every round: the CPU rule is judged over ten rounds (a futility stop at round 4 saw less overlap)
        verdict = run_fixture(FIXTURES[name], tmp_path / f"sandbox{attempt}", timing_rounds=10, sequential=False)
        if not core_withheld(verdict):
            break
    assert verdict.status == "rejected", f"{verdict.status}: {verdict.reason}"
    assert "thread(s) allow" in verdict.reason


DILUTERS = ["w4d_sleep_every_4", "w4d_sleep_every_8", "w4d_sleep_per_shape", "w4d_sleep_one_shape"]


@pytest.mark.skipif(cgroup_root() is None, reason="exact CPU accounting needs a cgroup v2 folder on this machine")
@pytest.mark.parametrize("name", DILUTERS)
def test_idle_requests_do_not_dilute_a_second_core(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A candidate that sleeps in some requests and burns a hidden core in the rest: averaged over every request
    its CPU per wall second stays under its budget (`faster` 1.27-3.11x before the rules read the requests the
    speed is made of); judged there, it is named by its CPU."""
    monkeypatch.setenv("KERNEL_AGENT_NO_CGROUP_V1", "cpuset")
    for attempt in range(ATTEMPTS):
        verdict = run_fixture(FIXTURES[name], tmp_path / f"sandbox{attempt}", timing_rounds=10, sequential=False)
        if not core_withheld(verdict) and "too busy to measure" not in verdict.reason:
            break
    # Not faster, whatever the load let the hidden core do: rejected by name when it ran beside the worker, or
    # `correct` when the busy machine gave it too little of a second core to gain (0.95x once here).
    assert verdict.status in ("rejected", "correct", "flagged"), f"{verdict.status}: {verdict.reason}"
    if verdict.status == "rejected":
        assert "thread(s) allow" in verdict.reason and "at or below the median time" in verdict.reason


def test_without_a_cgroup_freezer_a_process_that_resumes_itself_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SIGSTOP fallback: a timer the candidate armed sends it SIGCONT between requests; the next thaw
    finds it running (issue 31 E). Under the cgroup freezer the same fixture reads correct (test_fixtures)."""
    monkeypatch.setenv("KERNEL_AGENT_FREEZER", "signal")
    verdict = run_fixture(FIXTURES["w3e_timer_resume"], tmp_path / "sandbox")
    assert verdict.status == "rejected", f"{verdict.status}: {verdict.reason}"
    assert "escaped the freezer (SIGSTOP)" in verdict.reason
    assert verdict.accounting is None or verdict.accounting["candidate"]["freezer"] == "SIGSTOP"


def test_a_cgroup_freezer_holds_where_the_machine_has_one(tmp_path: Path) -> None:
    verdict = run_fixture(FIXTURES["ok_faster"], tmp_path / "sandbox")
    freezer = verdict.timing.accounting.candidate.freezer
    if cgroup_root() is not None:
        assert freezer == "cgroup v2 freezer", freezer
    assert f"frozen between requests by {freezer}" in verdict.isolation
