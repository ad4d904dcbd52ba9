"""Every THREATS.md fixture through the real evaluation path: exact status, distinctive reason,
and no process of ours left behind afterwards."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from adversarial.common import WEAKER_LEVELS_SAMPLE, all_fixtures, run_fixture, sandbox_processes
from kernel_agent.sandbox.host.levels import attempt

# Fixtures with placeholders get dedicated tests (test_orchestrator_world.py) that supply real targets.
FIXTURES = [f for f in all_fixtures() if not f.params]


def assert_no_stale_processes(sandbox_root: Path) -> None:
    deadline = time.monotonic() + 5
    left = sandbox_processes(sandbox_root)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = sandbox_processes(sandbox_root)
    assert not left, f"stale processes after the evaluation: {left}"


def test_there_is_a_fixture_for_at_least_30_rows() -> None:
    fixtures = all_fixtures()
    assert len(fixtures) >= 30
    rows = {f.row for f in fixtures if f.row != "control"}
    assert len(rows) >= 25, sorted(rows)


SAMPLE = [f for f in FIXTURES if f.name in WEAKER_LEVELS_SAMPLE]


def test_the_weaker_levels_sample_names_fixtures_that_exist() -> None:
    assert {f.name for f in SAMPLE} == set(WEAKER_LEVELS_SAMPLE)


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.name for f in FIXTURES])
def test_fixture_verdict(tmp_path: Path, fixture) -> None:
    check_fixture(tmp_path, fixture)


@pytest.mark.parametrize("level", ["unshare", "process"])
@pytest.mark.parametrize("fixture", SAMPLE, ids=[f.name for f in SAMPLE])
def test_fixture_verdict_at_a_weaker_level(tmp_path: Path, fixture, level: str) -> None:
    """What a container gets (no bubblewrap): the same verdicts behind the mount namespace, Landlock and seccomp."""
    tried = attempt(level)
    if not tried.works:
        pytest.skip(f"{level} does not start here: {tried.why}")
    check_fixture(tmp_path, fixture, isolation=level)


def check_fixture(tmp_path: Path, fixture, **overrides: object) -> None:
    sandbox_root = tmp_path / "sandbox"
    verdict = run_fixture(fixture, sandbox_root, **overrides)
    if overrides:
        assert verdict.isolation.startswith(str(overrides["isolation"])), verdict.isolation
    allowed = fixture.expect.split("|")
    assert verdict.status in allowed, f"{fixture.name}: {verdict.status}: {verdict.reason}"
    assert any(r in verdict.reason for r in fixture.reason.split("|")), (
        f"{fixture.name}: {verdict.reason!r} lacks {fixture.reason!r}"
    )
    assert "\n" not in verdict.reason
    if verdict.passed:
        assert verdict.correct is True and verdict.speedup is not None
        assert verdict.speedup < 1000, verdict.timing
    else:
        assert verdict.speedup is None
    if fixture.name == "ok_baseline_itself":
        # A 95% interval misses 1.0 now and then (CI: [1.006, ...] once, `correct`); what must hold is that an
        # honest copy reads within the per-process band around 1 and its interval never clears the bar.
        low, high = verdict.speedup_ci
        assert 0.85 < verdict.speedup < 1.18 and low <= 1.02 and high >= 0.98, verdict.speedup_ci
    if fixture.name in ("ok_faster", "ok_per_shape_tuned", "ok_try_except", "b34_stop_the_baseline"):
        assert verdict.speedup_ci[0] > 1.02
    assert_no_stale_processes(sandbox_root)
    assert not list(sandbox_root.glob("*/")), "the work dir was not removed"
