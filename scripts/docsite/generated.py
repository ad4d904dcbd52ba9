"""The generated reference pages, by their path in the site: the one list the mkdocs hook and the tests read."""

from __future__ import annotations

from collections.abc import Callable


def builders() -> dict[str, Callable[[], str]]:
    from docsite import cli_reference, options_reference, outcomes_reference, problem_reference

    return {
        "reference/cli.md": cli_reference.page,
        "reference/options.md": options_reference.page,
        "reference/outcomes.md": outcomes_reference.page,
        "reference/problem-format.md": problem_reference.page,
    }


def pages() -> dict[str, str]:
    return {uri: build() for uri, build in builders().items()}
