"""Shared fixtures: paths, running the real CLI as a user would, and the `e2e` marker.

Every test under tests/e2e/ and tests/adversarial/ is marked `e2e` (real processes, sandboxes,
databases: seconds to minutes each); tests/unit/ is the in-process inner loop, `pytest -m "not e2e"`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression  # pytest's own `-m` compiler: used only to skip collecting e2e folders

from kernel_agent.core.timing_result import ShapeTiming, Stopping, Summary, TimingResult

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "examples"
SOFTMAX = FIXTURES / "softmax64"
CANDIDATES = FIXTURES / "candidates"
E2E_DIRS = (ROOT / "tests" / "e2e", ROOT / "tests" / "adversarial")


def _in_e2e(path: Path) -> bool:
    return any(path == folder or path.is_relative_to(folder) for folder in E2E_DIRS)


def _selects_no_e2e(markexpr: str) -> bool:
    """Whether `-m markexpr` deselects every test marked e2e, whatever other markers it carries.

    Tried over every assignment of the expression's other names (a handful), so `-m "not e2e or gpu"`
    still collects the e2e folders and only an expression that rules out e2e skips them."""
    try:
        expr = Expression.compile(markexpr)
        others = sorted(expr.idents() - {"e2e"})
    except (SyntaxError, AttributeError):  # pytest reports a bad expression itself; an older pytest: collect everything
        return False
    if len(others) > 10:
        return False
    for bits in range(1 << len(others)):
        if expr.evaluate(_carrying({"e2e", *(name for i, name in enumerate(others) if bits >> i & 1)})):
            return False
    return True


def _carrying(marks: set[str]) -> Callable[..., bool]:
    """The `-m` matcher of a test that carries exactly `marks` (keyword arguments of a mark ignored)."""
    return lambda name, /, **kwargs: name in marks


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under `-m "not e2e"` the e2e folders are not even imported: collecting them imports Ray,
    the OpenAI client, SQLAlchemy and hypothesis, a third of the inner loop's time."""
    markexpr = config.option.markexpr
    if markexpr and _in_e2e(collection_path) and _selects_no_e2e(markexpr):
        return True
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by `-m`
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/e2e/ and tests/adversarial/ `e2e`."""
    for item in items:
        if _in_e2e(item.path):
            item.add_marker(pytest.mark.e2e)


REFERENCE_FLAGS = ("--references", "--no-references", "--remeasure-references", "--help")
RETIME_FLAGS = ("--retime-best", "--no-retime-best", "--help")


def cli_args(args: list[str] | tuple[str, ...]) -> list[str]:
    """`eval` and `optimize` with `--no-references` unless the test names a reference flag: torch eager and
    torch.compile points cost about 40-80 s per problem on two cores (inductor compiles in each sandbox), and
    only the tests of reference points (test_references.py) need them. `optimize` also gets `--no-retime-best`
    unless the test names that flag: re-timing a best with every round is one more full A/B per kernel, and
    only its own test needs it."""
    args = list(args)
    if args and args[0] in ("eval", "optimize") and not any(flag in args for flag in REFERENCE_FLAGS):
        args.append("--no-references")
    if args and args[0] == "optimize" and not any(flag in args for flag in RETIME_FLAGS):
        args.append("--no-retime-best")
    return args


def run_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run `kernel-agent ARGS` in a fresh interpreter, exactly as a user would (see `cli_args`)."""
    command = [sys.executable, "-m", "kernel_agent", *cli_args(args)]
    return subprocess.run(
        command, cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def eval_json(
    problem: Path, candidate: Path, *extra: str, tmp_path: Path
) -> tuple[dict, subprocess.CompletedProcess[str]]:
    proc = run_cli(
        "eval", str(problem), str(candidate), "--json", "--sandbox", str(tmp_path / "sandbox"), "--threads", "1", *extra
    )
    assert proc.stdout.count("\n") == 1, (
        f"expected one JSON line on stdout, got: {proc.stdout!r} / {proc.stderr[-2000:]}"
    )
    return json.loads(proc.stdout), proc


def shape_timing(
    shape: tuple[int, ...] = (256, 2048), base_ms: float = 2.0, cand_ms: float = 1.0, **fields: object
) -> ShapeTiming:
    """One benchmark's typed timing, its speedup the ratio of its medians (`fields` in place of the rest)."""
    values: dict = dict(
        shape=tuple(shape), dtype="float32", speedup=base_ms / cand_ms, baseline_median_ms=base_ms,
        candidate_median_ms=cand_ms, speedup_ci=(0.9 * base_ms / cand_ms, 1.1 * base_ms / cand_ms),
        baseline_p20_ms=base_ms, candidate_p80_ms=cand_ms,
    )  # fmt: skip
    return ShapeTiming(**{**values, **fields})


def timing_record(speedup: float = 2.0, ci: tuple[float, float] = (1.8, 2.2), **fields: object) -> TimingResult:
    """A typed timing record as one pair of processes writes it: `speedup` over one shape, `fields` in place
    of its own (`per_shape=[]` for a record without shapes)."""
    side = Summary(1.0, 0.9, 1.1, 1.0, 40)
    values: dict = dict(
        speedup=speedup, speedup_ci=ci, ci_level="95%", statistical_ci=ci, process_effect=0.08,
        baseline=replace(side, median_ms=2.0), candidate=replace(side, median_ms=2.0 / speedup), rounds=10,
        max_rounds=10, stopping=Stopping(rule="fixed rounds", ended_by="rounds"), calls_per_block=[4],
        calls_per_request=[1], per_shape=[shape_timing(base_ms=2.0, cand_ms=2.0 / speedup, speedup_ci=ci)],
        audited_calls=4, record_floor_ms=[0.05], timed_inputs=["drawn per round, the same for both sides"],
        clock="worker perf_counter_ns", threads=1, work_budget_exceeded=None, contention=None, accounting=None,
    )  # fmt: skip
    return TimingResult(**{**values, **fields})


@pytest.fixture
def sandbox_root(tmp_path: Path) -> Path:
    return tmp_path / "sandbox"


def path_without(tool: str, folder: Path) -> str:
    """A PATH that finds every program the current one does except `tool` (links in `folder`): what a machine
    without bubblewrap looks like, on one that has it."""
    folder.mkdir(parents=True, exist_ok=True)
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            link = folder / entry.name
            if entry.name != tool and not link.exists() and not link.is_symlink():
                link.symlink_to(entry.path)
    return str(folder)


@pytest.fixture
def no_bwrap_path(tmp_path: Path) -> str:
    return path_without("bwrap", tmp_path / "no-bwrap-bin")
