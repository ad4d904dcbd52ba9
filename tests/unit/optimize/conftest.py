"""The optimize command's option parser, on its own: what a command line makes of its flags."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import typer

from kernel_agent.cli.optimize_cmd import NOT_OFFERED
from kernel_agent.cli.options import GIVEN, fields_of, from_config
from kernel_agent.optimize.config import RunPlan


@pytest.fixture
def probe_app() -> Callable[[], tuple[typer.Typer, dict]]:
    """A function making an app whose one command takes `optimize`'s plan options and keeps the plan and the
    names typed in the dict beside it."""

    def make() -> tuple[typer.Typer, dict]:
        seen: dict = {}

        @from_config
        def command(plan: RunPlan = fields_of(skip=NOT_OFFERED), given: frozenset[str] = GIVEN) -> None:
            seen.update(plan=plan, given=given)

        probe = typer.Typer(rich_markup_mode=None)
        probe.command()(command)
        return probe, seen

    return make
