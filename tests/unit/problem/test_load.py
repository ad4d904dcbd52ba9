"""Problem loading: every malformed problem gives one clear line, a KernelBench file loads without allocating."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SOFTMAX

from kernel_agent.problem.load import ProblemError, load_problem

GOOD = "def reference(x): return x\ndef make_inputs(*a): pass\nSHAPES = [(4,)]\n"


def write_problem(folder: Path, problem: str, kernel: str = "def kernel(x):\n    return x\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "problem.py").write_text(problem)
    (folder / "kernel.py").write_text(kernel)
    return folder


def test_fixture_problem_loads_with_defaults() -> None:
    problem = load_problem(SOFTMAX)
    assert problem.kind == "native" and problem.entry_point == "kernel"
    assert problem.shapes == [(256, 2048)] and (3, 17) in problem.check_shapes
    assert problem.tolerances["float32"] == (1e-4, 1e-4)
    assert problem.tunables == {"CHUNK": [64, 256]}
    assert problem.distributions == ["normal", "uniform"]
    assert problem.all_check_shapes() == [(1, 1), (3, 17), (37, 130), (256, 2048)]  # cheap failures first


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ("SHAPES = [(4,)]\ndef reference(x): return x\n", "make_inputs"),
        ("import nonexistent_module_xyz\n", "failed to import"),
        ("import sys\nsys.exit(3)\n", "failed to import: SystemExit"),
        ("def reference(x): return x\ndef make_inputs(*a): pass\nSHAPES = 'big'\n", "SHAPES"),
        ("def reference(x): return x\ndef make_inputs(*a): pass\nSHAPES = []\n", "at least one"),
        ("def reference(x): return x\ndef make_inputs(*a): pass\nSHAPES = [(0, 3)]\n", "positive ints"),
        ("def reference(x): return x\ndef make_inputs(*a): pass\nSHAPES = [(True, 3)]\n", "positive ints"),
        (
            "def reference(x): return x\ndef make_inputs(*a): pass\nSHAPES = [(4,)]\nDTYPES = ['float8']\n",
            "unknown dtype",
        ),
        ("def reference(x): return x\ndef make_inputs(*a): pass\nSHAPES = [(4,)]\nDEVICE = 'tpu'\n", "DEVICE"),
        (GOOD + "TOLERANCES = {'float32': (1e-4,)}\n", "(rtol, atol)"),
        (GOOD + "TOLERANCES = {'float32': (float('nan'), 1e-4)}\n", "(rtol, atol)"),
        (GOOD + "TOLERANCES = {'fp32': (1e-4, 1e-4)}\n", "unknown dtype key"),
        (GOOD + "NORM_TOLERANCES = {'float32': 0}\n", "finite positive"),
        (GOOD + "TUNABLES = [('BLOCK', [1, 2])]\n", "TUNABLES must be a dict"),
        (GOOD + "TUNABLES = {'BLOCK': []}\n", "non-empty list"),
        (GOOD + "TUNABLES = {'2BLOCK': [1]}\n", "identifiers"),
        (GOOD + "INPUT_DISTRIBUTIONS = ['cauchy']\n", "unknown entry 'cauchy'"),
        (GOOD + "NAME = 7\n", "NAME must be a string"),
        ("def reference(x) return x\n", "failed to import"),
        (GOOD.replace("pass", "return (1,)") + "shape_of = 3\n", "shape_of must be a function"),
        (
            "import torch\ndef reference(x): return x\nSHAPES = [(4, 6)]\nCHECK_SHAPES = [(4, 6)]\n"
            "def make_inputs(s, d, v, g): return (torch.zeros(*s),)\ndef shape_of(x): return x.shape[::-1]\n",
            "shape_of(*make_inputs([4, 6])) gave [6, 4], not [4, 6]",
        ),
        (
            "import torch\ndef reference(x): return x\nSHAPES = [(4, 6)]\nCHECK_SHAPES = [(4, 6)]\n"
            "def make_inputs(s, d, v, g): return (torch.zeros(*s),)\ndef shape_of(x, y): return x.shape\n",
            "shape_of(*make_inputs([4, 6])) failed: TypeError",
        ),
    ],
)
def test_malformed_problems_give_one_line(tmp_path: Path, source: str, needle: str) -> None:
    with pytest.raises(ProblemError) as info:
        load_problem(write_problem(tmp_path / "p", source))
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_missing_files_and_paths_are_named(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "problem.py").write_text("")
    with pytest.raises(ProblemError, match="kernel.py"):
        load_problem(folder)
    with pytest.raises(ProblemError, match="no such problem"):
        load_problem(tmp_path / "absent")
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(ProblemError, match="not a problem folder"):
        load_problem(tmp_path / "notes.txt")


KERNELBENCH = '''"""A linear layer far too large to allocate here."""
import torch


class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = torch.nn.Linear(n, n)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(1 << 20, 1 << 16, dtype=torch.bfloat16)]  # 128 GiB


def get_init_inputs():
    return [1 << 16]
'''


def test_a_kernelbench_file_is_sized_on_the_meta_device(tmp_path: Path) -> None:
    """get_inputs() runs under the meta device: a GPU-sized file loads at once, with its shape and dtype."""
    path = tmp_path / "level1_big_linear.py"
    path.write_text(KERNELBENCH)
    problem = load_problem(path)
    assert problem.kind == "kernelbench" and problem.entry_point == "ModelNew" and problem.name == "level1_big_linear"
    assert problem.shapes == [(1 << 20, 1 << 16)] and problem.dtypes == ["bfloat16"]
    assert problem.description == "A linear layer far too large to allocate here."
    assert problem.baseline_as_candidate.endswith("\n\nModelNew = Model\n")


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ("import torch\nclass Model: pass\ndef get_inputs(): return []\n", "`get_init_inputs`"),
        (
            "import torch\nclass Model: pass\ndef get_init_inputs(): return []\n"
            "def get_inputs(): raise RuntimeError('no')\n",
            "get_inputs() failed: RuntimeError: no",
        ),
        ("raise ImportError('broken')\n", "failed to import: ImportError: broken"),
        ("import sys\nsys.exit(3)\n", "failed to import: SystemExit: 3"),  # not a silent exit of the whole CLI
    ],
)
def test_malformed_kernelbench_files_give_one_line(tmp_path: Path, source: str, needle: str) -> None:
    path = tmp_path / "kb.py"
    path.write_text(source)
    with pytest.raises(ProblemError) as info:
        load_problem(path)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_shape_of_is_checked_on_check_shapes_only(tmp_path: Path) -> None:
    """Benchmark shapes may be far too large to make at load: without CHECK_SHAPES nothing is made."""
    marker = tmp_path / "made-a-benchmark-size-input"
    source = (
        "import pathlib, torch\ndef reference(x): return x\nSHAPES = [(1 << 20, 1 << 20)]\n"
        "def make_inputs(s, d, v, g):\n"
        "    if s[0] * s[1] > 100:\n"
        f"        pathlib.Path({str(marker)!r}).touch()\n"
        "        raise MemoryError('too large')\n"
        "    return (torch.zeros(*s),)\n"
        "def shape_of(x): return tuple(x.shape)[::-1]\n"
    )
    assert load_problem(write_problem(tmp_path / "big", source)).shapes == [(1 << 20, 1 << 20)]
    assert not marker.exists()
    checked = source.replace("SHAPES = ", "CHECK_SHAPES = [(2, 3)]\nSHAPES = ", 1)
    with pytest.raises(ProblemError, match=r"gave \[3, 2\], not \[2, 3\]"):  # the same wrong shape_of, checked
        load_problem(write_problem(tmp_path / "checked", checked))
