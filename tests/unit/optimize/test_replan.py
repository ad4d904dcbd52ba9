"""optimize/replan.py: a resumed run keeps every stored option, or visibly takes the one typed again."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kernel_agent.core.config import Device, Devices, ExecutorKind
from kernel_agent.optimize.config import RunPlan
from kernel_agent.optimize.replan import ReplanError, replan, summary


def first_sitting() -> RunPlan:
    plan = RunPlan()
    plan.evaluation.timeout, plan.evaluation.min_gain, plan.evaluation.threads = 100.0, 0.05, 1
    plan.search.proposal_rounds = 5
    return RunPlan.from_json(plan.to_json())  # as --resume reads it


@pytest.fixture
def typed(probe_app):
    def parse(*args: str) -> tuple[RunPlan, frozenset[str]]:
        """The plan and the given names the command line makes of `args` (the real option parser)."""
        probe, seen = probe_app()
        result = CliRunner().invoke(probe, list(args))
        assert result.exit_code == 0, result.output
        return seen["plan"], seen["given"]

    return parse


def test_nothing_typed_keeps_every_stored_option(typed) -> None:
    plan, changes = replan(first_sitting(), *typed())
    assert plan == first_sitting() and changes == []


def test_the_same_value_typed_again_is_no_change(typed) -> None:
    plan, changes = replan(first_sitting(), *typed("--timeout", "100", "--threads", "1"))
    assert plan == first_sitting() and changes == []


def test_each_option_typed_again_replaces_the_stored_one_and_is_named(typed) -> None:
    """The three of the issue: --timeout (the one a resume used to drop silently), --min-gain, --threads."""
    plan, changes = replan(first_sitting(), *typed("--timeout", "60", "--min-gain", "0.1", "--threads", "2"))
    assert (plan.evaluation.timeout, plan.evaluation.min_gain, plan.evaluation.threads) == (60.0, 0.1, 2)
    assert plan.search.proposal_rounds == 5  # not typed: as stored
    line = summary(7, changes)
    assert line == (
        "run 7: --timeout 60 replaces the stored --timeout 100, --min-gain 0.1 replaces the stored --min-gain 0.05, "
        "--threads 2 replaces the stored --threads 1 (every other option as stored)"
    )
    assert RunPlan.from_json(plan.to_json()) == plan  # what a later resume reads


def test_a_switch_and_a_budget_are_named_as_a_user_types_them(typed) -> None:
    plan, changes = replan(first_sitting(), *typed("--no-references", "--max-candidates", "3"))
    assert plan.references.references is False and plan.budget.max_candidates == 3
    assert [str(c) for c in changes] == [
        "--max-candidates 3 replaces the stored --max-candidates (default)",
        "--no-references replaces the stored --references",
    ]


def test_a_ray_address_typed_alone_moves_the_run_to_ray_and_local_drops_it(typed) -> None:
    plan, changes = replan(first_sitting(), *typed("--ray-address", "head:6379"))
    assert (plan.executor, plan.ray_address) == (ExecutorKind.RAY, "head:6379")
    assert [c.flag for c in changes] == ["--ray-address", "--executor"]
    back, _ = replan(plan, *typed("--executor", "local"))
    assert (back.executor, back.ray_address) == (ExecutorKind.LOCAL, None)


def test_another_device_list_is_refused_in_one_line(typed) -> None:
    stored = first_sitting()
    stored.devices = Devices((Device.CPU,))
    with pytest.raises(ReplanError, match="--device cannot change on resume"):
        replan(stored, *typed("--device", "cpu,cuda"))
    assert replan(stored, *typed("--device", "cpu"))[1] == []
