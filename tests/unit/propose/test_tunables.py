"""Tunables in kernel sources: read and rewritten in place, every other byte left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES

from kernel_agent.problem.load import load_problem
from kernel_agent.propose.tunables import TunableError, apply_config, config_note, read_config

EXAMPLE_DIRS = sorted(
    d for d in EXAMPLES.iterdir() if (d / "kernel.py").is_file() and "TUNABLES" in (d / "problem.py").read_text()
)

PY_KERNEL = '''"""A toy kernel: BLOCK_SIZE = 999 in the docstring must not count."""

import torch

BLOCK_SIZE = 128  # rows per program
NUM_WARPS: int = 2
LABEL = "ééé"; MODE = "fast"


def kernel(x):
    BLOCK_SIZE = 7  # a local, not the tunable
    return x * 1 + BLOCK_SIZE * 0 + NUM_WARPS * 0
'''

CPP_KERNEL = '''"""C++ kernel with #define tunables."""

THREADS = 1

CPP_SOURCE = r"""
#include <math.h>
#define TILE 32
#define TILE_HALF 16
  #  define UNROLL 4
// #define TILE 8 in a comment line is not a define
"""

EXTRA = "#define VEC 2\\n"


def helper():
    return """
#define TILE 999
"""
'''


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    """Pairs of (old line, new line) that differ; asserts the line count is unchanged."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    assert len(old) == len(new)
    return [(a, b) for a, b in zip(old, new, strict=True) if a != b]


def test_examples_found() -> None:
    names = {d.name for d in EXAMPLE_DIRS}
    assert {"cpp_softmax", "cpp_matmul", "triton_softmax", "torch_opchain"} <= names


@pytest.mark.parametrize("folder", EXAMPLE_DIRS, ids=lambda d: d.name)
def test_example_kernels_read_and_round_trip(folder: Path) -> None:
    problem = load_problem(folder)
    assert problem.tunables, f"{folder.name} declares no tunables"
    source = problem.baseline_source
    names = list(problem.tunables)
    current = read_config(source, names)
    assert set(current) == set(names)
    for name, value in current.items():
        assert value in problem.tunables[name], f"{folder.name}: {name}={value!r} not in {problem.tunables[name]}"
    for name, values in problem.tunables.items():
        for value in values:
            edited = apply_config(source, {name: value})
            assert read_config(edited, names) == {**current, name: value}
            diff = changed_lines(source, edited)
            assert len(diff) == (0 if value == current[name] else 1)
            for old, new in diff:
                assert name in old and new == old.replace(str(current[name]), str(value), 1)
    for pick in (min, max):
        config = {name: pick(values) for name, values in problem.tunables.items()}
        assert read_config(apply_config(source, config), names) == config


def test_apply_changes_only_the_values() -> None:
    config = {"BLOCK_SIZE": 1024, "NUM_WARPS": 8, "MODE": "slow"}
    edited = apply_config(PY_KERNEL, config)
    assert read_config(edited, list(config)) == config
    assert changed_lines(PY_KERNEL, edited) == [
        ("BLOCK_SIZE = 128  # rows per program\n", "BLOCK_SIZE = 1024  # rows per program\n"),
        ("NUM_WARPS: int = 2\n", "NUM_WARPS: int = 8\n"),
        ('LABEL = "ééé"; MODE = "fast"\n', "LABEL = \"ééé\"; MODE = 'slow'\n"),
    ]
    assert apply_config(PY_KERNEL, {"BLOCK_SIZE": 128, "NUM_WARPS": 2}) == PY_KERNEL


def test_apply_keeps_unchanged_spelling_and_line_endings() -> None:
    source = "A = 0x40\r\nB = 1_000\r\n# end\r\n"
    assert read_config(source, ["A", "B"]) == {"A": 64, "B": 1000}
    assert apply_config(source, {"A": 64, "B": 2}) == "A = 0x40\r\nB = 2\r\n# end\r\n"


def test_define_substitution_inside_cpp_source() -> None:
    names = ["THREADS", "TILE", "TILE_HALF", "UNROLL", "VEC"]
    assert read_config(CPP_KERNEL, names) == {"THREADS": 1, "TILE": 32, "TILE_HALF": 16, "UNROLL": 4, "VEC": 2}
    edited = apply_config(CPP_KERNEL, {"TILE": 64, "UNROLL": 8, "VEC": 4, "THREADS": 2})
    assert read_config(edited, names) == {"THREADS": 2, "TILE": 64, "TILE_HALF": 16, "UNROLL": 8, "VEC": 4}
    assert changed_lines(CPP_KERNEL, edited) == [
        ("THREADS = 1\n", "THREADS = 2\n"),
        ("#define TILE 32\n", "#define TILE 64\n"),
        ("  #  define UNROLL 4\n", "  #  define UNROLL 8\n"),
        ('EXTRA = "#define VEC 2\\n"\n', 'EXTRA = "#define VEC 4\\n"\n'),
    ]
    assert "#define TILE 999" in edited  # a string inside a function is not the kernel's source


def test_missing_or_non_literal_tunable_names_it() -> None:
    with pytest.raises(TunableError, match="NOT_THERE"):
        read_config(PY_KERNEL, ["BLOCK_SIZE", "NOT_THERE"])
    with pytest.raises(TunableError, match="NOT_THERE"):
        apply_config(PY_KERNEL, {"NOT_THERE": 1})
    with pytest.raises(TunableError, match="BLOCK_SIZE.*non-literal"):
        read_config("import os\nBLOCK_SIZE = os.cpu_count()\n", ["BLOCK_SIZE"])
    with pytest.raises(TunableError, match="TILE"):
        apply_config(CPP_KERNEL, {"TILE": "3 2"})
    assert issubclass(TunableError, ValueError)


def test_config_note() -> None:
    assert config_note({"BLOCK_SIZE": 128, "NUM_WARPS": 4}) == "BLOCK_SIZE=128 NUM_WARPS=4"


def test_every_module_level_assignment_is_rewritten_and_the_last_one_is_read() -> None:
    """Python keeps the last binding; leaving an earlier one stale would make the diff lie about the config."""
    source = "BLOCK = 64\nif True:\n    BLOCK = 7  # not module level\nBLOCK = 128\n"
    assert read_config(source, ["BLOCK"]) == {"BLOCK": 128}
    assert (
        apply_config(source, {"BLOCK": 256})
        == "BLOCK = 256\nif True:\n    BLOCK = 7  # not module level\nBLOCK = 256\n"
    )


def test_define_values_are_spelled_as_c_tokens() -> None:
    source = 'SRC = """\n#define USE_FMA 0\n#define SCALE 0.5\n#define MODE fast\n"""\n'
    edited = apply_config(source, {"USE_FMA": True, "SCALE": 0.25, "MODE": "slow"})
    assert edited == 'SRC = """\n#define USE_FMA 1\n#define SCALE 0.25\n#define MODE slow\n"""\n'
    assert read_config(edited, ["USE_FMA", "SCALE", "MODE"]) == {"USE_FMA": 1, "SCALE": 0.25, "MODE": "slow"}
    with pytest.raises(TunableError, match="not an int, float, bool or str"):
        apply_config(source, {"SCALE": [0.5]})


def test_a_source_that_does_not_parse_is_named() -> None:
    with pytest.raises(TunableError, match="does not parse .line 2"):
        read_config("A = 1\ndef (:\n", ["A"])
