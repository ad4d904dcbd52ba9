"""The checked tolerance is measured once per problem file and kept in the user's cache: a fresh process
reads it back, a changed problem file measures again, and an entry that is not two sound errors is ignored."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES

from kernel_agent.evaluate import tolerance
from kernel_agent.problem.load import load_problem


@pytest.fixture
def cancels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KERNEL_AGENT_TOLERANCE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tolerance, "_CACHE", {})
    folder = tmp_path / "cancellation"
    shutil.copytree(FIXTURES / "cancellation", folder)
    return folder


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    measure = tolerance._measure

    def counting(problem, dtype, device):  # the real measurement, counted
        calls.append(problem.name)
        return measure(problem, dtype, device)

    monkeypatch.setattr(tolerance, "_measure", counting)
    return calls


def test_a_fresh_process_reads_the_measured_errors_back(cancels: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counted(monkeypatch)
    first = tolerance.checked_tolerance(load_problem(cancels), "float32", "cpu")
    assert first.widened and len(calls) == 1
    monkeypatch.setattr(tolerance, "_CACHE", {})  # what a new interpreter starts with
    again = tolerance.checked_tolerance(load_problem(cancels), "float32", "cpu")
    assert again == first and len(calls) == 1
    (entry,) = tolerance.cache_dir().glob("*.json")
    assert set(json.loads(entry.read_text())) >= {"excess", "norm"}


def test_a_changed_problem_file_is_measured_again(cancels: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counted(monkeypatch)
    tolerance.checked_tolerance(load_problem(cancels), "float32", "cpu")
    problem_file = cancels / "problem.py"
    problem_file.write_text(problem_file.read_text().replace("5000.0", "50.0"))
    monkeypatch.setattr(tolerance, "_CACHE", {})
    tolerance.checked_tolerance(load_problem(cancels), "float32", "cpu")
    assert len(calls) == 2 and len(list(tolerance.cache_dir().glob("*.json"))) == 2


@pytest.mark.parametrize("written", ['{"excess": -1, "norm": 0}', '{"excess": NaN, "norm": 0}', "not json", "{}"])
def test_an_unsound_entry_is_measured_again(cancels: Path, monkeypatch: pytest.MonkeyPatch, written: str) -> None:
    calls = _counted(monkeypatch)
    honest = tolerance.checked_tolerance(load_problem(cancels), "float32", "cpu")
    (entry,) = tolerance.cache_dir().glob("*.json")
    entry.write_text(written)
    monkeypatch.setattr(tolerance, "_CACHE", {})
    again = tolerance.checked_tolerance(load_problem(cancels), "float32", "cpu")
    assert len(calls) == 2 and again.widened and again.tolerance.atol < 10 * honest.tolerance.atol


def test_the_same_file_with_other_check_shapes_is_measured_apart(
    cancels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference points pass the problem with its check shapes emptied: their errors, measured on fewer
    shapes, must not stand in for the full problem's."""
    calls = _counted(monkeypatch)
    problem = load_problem(cancels)
    tolerance.checked_tolerance(dataclasses.replace(problem, check_shapes=[]), "float32", "cpu")
    monkeypatch.setattr(tolerance, "_CACHE", {})
    tolerance.checked_tolerance(problem, "float32", "cpu")
    assert len(calls) == 2 and len(list(tolerance.cache_dir().glob("*.json"))) == 2
