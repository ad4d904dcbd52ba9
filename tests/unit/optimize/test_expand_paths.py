"""The kernels a batch runs: folders of problem folders, KernelBench levels (one file per problem), globs."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_agent.optimize.run import PlanError, expand_paths


def test_a_kernelbench_level_is_every_file_in_kernelbench_order(tmp_path: Path) -> None:
    for name in ("10_b.py", "2_a.py", "1_c.py", "__init__.py"):
        (tmp_path / name).write_text("")
    assert [Path(p).name for p in expand_paths([str(tmp_path)])] == ["1_c.py", "2_a.py", "10_b.py"]


def test_a_folder_of_problem_folders_is_each_folder_and_repeats_are_dropped(tmp_path: Path) -> None:
    for name in ("b", "a"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "problem.py").write_text("")
    (tmp_path / "notes").mkdir()
    found = expand_paths([str(tmp_path), str(tmp_path / "a")])
    assert [Path(p).name for p in found] == ["a", "b"]


def test_an_empty_folder_is_refused_with_what_it_should_hold(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="KernelBench .py files"):
        expand_paths([str(tmp_path)])
