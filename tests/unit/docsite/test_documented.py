"""The docs against the code: the generated reference covers every command, option and status; every command
line written in the README or the guide names a command and options the app still has; every shell block of the
guide either runs in CI or says why not; the README keeps the two commands CI and new users run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docsite import cli_reference, generated, outcomes_reference
from docsite.blocks import DOCS, ROOT, SHELL_LANGUAGES, blocks, command_lines, guide_pages
from docsite.documented import stale, stale_lines

SETUP_AND_TEST = "./scripts/setup && .venv/bin/python -m pytest -q"


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return generated.pages()


def test_every_command_and_option_is_in_the_command_reference(pages: dict[str, str]) -> None:
    text = pages["reference/cli.md"]
    for command in cli_reference.commands():
        assert f"{{#{cli_reference.anchor(command)}}}" in text, command.name
        for param in command.params():
            for spelling in (*param.opts, *param.secondary_opts):
                if spelling.startswith("--"):
                    assert spelling in text, f"{command.name} {spelling}"


def test_every_status_and_flag_is_in_the_outcomes_reference(pages: dict[str, str]) -> None:
    from kernel_agent.core.verdict import Status
    from kernel_agent.optimize.search_state import KernelStatus

    text = pages["reference/outcomes.md"]
    for status in (*Status, *KernelStatus):
        assert f"- `{status.value}` (" in text, status
    for _, flag in outcomes_reference.flag_texts():
        assert flag.split("{")[0][:30] in text
    assert len(outcomes_reference.flag_texts()) >= 3


def test_the_verdicts_guide_names_exactly_the_statuses_the_code_has() -> None:
    """The guide's tables of statuses and speed classes and its list of kernel outcomes, against the enums: a
    status added, renamed or removed in the code fails here until the guide says what it means."""
    from kernel_agent.core.verdict import Status
    from kernel_agent.optimize.search_state import KernelStatus
    from kernel_agent.timing.speed_class import SpeedClass

    text = (DOCS / "guide" / "verdicts.md").read_text()
    statuses, classes = text.split("## The statuses", 1)[1].split("## The speed class", 1)
    assert set(re.findall(r"^\| `(\w+)` \|", statuses, re.MULTILINE)) == {s.value for s in Status}
    assert set(re.findall(r"^\| `(\w+)` \|", classes.split("\n## ", 1)[0], re.MULTILINE)) == {
        c.value for c in SpeedClass
    }
    ends = text.split("## How a kernel's search ends", 1)[1].split("```", 1)[0]
    assert set(re.findall(r"`(\w+)`", ends)) >= {s.value for s in KernelStatus}


def test_every_documented_command_line_is_one_the_app_takes() -> None:
    assert stale_lines() == []


def test_a_removed_option_or_command_would_be_caught() -> None:
    assert stale(["optimize", "examples", "--rounds", "1"]) is None
    assert stale(["review", "latest"]) is None  # a group's default command, as the app resolves it
    assert "--no-such-option" in stale(["optimize", "--no-such-option", "3"])
    assert "no command" in stale(["tune-all", "examples"])
    assert "group" in stale(["runs"])


def test_command_lines_are_read_as_a_shell_would() -> None:
    text = "cat > a.py <<'PY'\nkernel-agent eval x\nPY\nOPENAI_API_KEY=k kernel-agent optimize p \\\n  --rounds 2 # c\n"
    text += 'kernel-agent eval a b --json > out.json || echo "exit $?"\n'
    assert command_lines(text) == [["optimize", "p", "--rounds", "2"], ["eval", "a", "b", "--json"]]


def test_every_shell_block_of_the_guide_runs_or_says_why_not() -> None:
    found = [b for page in guide_pages() for b in blocks(page) if b.language in SHELL_LANGUAGES]
    assert [b.where() for b in found if b.illustrative is not None and not b.illustrative] == []
    assert sum(b.runs for b in found) >= 10  # the doc tests run most of the guide
    assert {b.page for b in found if b.runs} >= {"guide/quickstart.md", "guide/export.md", "guide/batch.md"}
    assert all(b.language == "sh" for b in found), "one spelling, so a block cannot slip past the runner"


def test_the_guide_pages_are_the_sites_pages() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in guide_pages():
        assert f" {page.relative_to(DOCS)}\n" in nav, page


def test_the_readme_fits_one_screen_and_keeps_its_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 65
    shell = [b.text for b in blocks(ROOT / "README.md", root=ROOT) if b.language == "sh"]
    assert shell[0].startswith("./scripts/setup && .venv/bin/kernel-agent optimize examples ")
    assert shell[1] == SETUP_AND_TEST


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run is the README's second command, split in two: setup first, then the test command as a line."""
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    setup, tests = SETUP_AND_TEST.split(" && ")
    assert setup in ci and tests in ci and ci.index(setup) < ci.index(tests)


def test_reference_text_from_the_code_is_escaped_for_markdown() -> None:
    from docsite.markdown import code, prose

    assert prose("a <list[str]> of *globs* in `a_b`") == r"a &lt;list\[str\]&gt; of \*globs\* in `a_b`"
    assert code("`x`") == "`` `x` ``"


@pytest.mark.parametrize("path", sorted(Path(DOCS).rglob("*.md")), ids=lambda p: p.name)
def test_no_page_is_a_generated_page(path: Path) -> None:
    """A file in docs/ at a generated page's path would be replaced at build: the code is the one source."""
    assert str(path.relative_to(DOCS)) not in generated.builders()
