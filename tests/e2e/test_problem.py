"""Problem loading: clear one-line errors; degenerate problems refused by the audit."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SOFTMAX

from kernel_agent.problem.canaries import audit_problem
from kernel_agent.problem.load import ProblemError, load_problem


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
    audit_problem(problem)


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ("SHAPES = [(4,)]\ndef reference(x): return x\n", "make_inputs"),
        ("import nonexistent_module_xyz\n", "failed to import"),
        ("def reference(x): return x\ndef make_inputs(*a): pass\nSHAPES = 'big'\n", "SHAPES"),
        ("def reference(x): return x\ndef make_inputs(*a): pass\nSHAPES = [(0, 3)]\n", "positive ints"),
        ("def reference(x): return x\ndef make_inputs(*a): pass\nSHAPES = [(4,)]\nDTYPES = ['float8']\n", "unknown dtype"),
        ("def reference(x): return x\ndef make_inputs(*a): pass\nSHAPES = [(4,)]\nDEVICE = 'tpu'\n", "DEVICE"),
        ("def reference(x) return x\n", "failed to import"),
    ],
)
def test_malformed_problems_give_one_line(tmp_path: Path, source: str, needle: str) -> None:
    with pytest.raises(ProblemError) as info:
        load_problem(write_problem(tmp_path / "p", source))
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_missing_kernel_file(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "problem.py").write_text("")
    with pytest.raises(ProblemError, match="kernel.py"):
        load_problem(folder)


MAKER = "import torch\ndef make_inputs(shape, dtype, device, generator):\n    return (torch.randn(shape, generator=generator, dtype=dtype),)\nSHAPES = [(64, 64)]\n"


@pytest.mark.parametrize(
    ("reference", "canary"),
    [
        ("def reference(x):\n    return torch.zeros_like(x)\n", "zeros"),
        ("def reference(x):\n    return torch.ones_like(x)\n", "ones"),
        ("def reference(x):\n    return x.clone()\n", "input0"),
    ],
)
def test_degenerate_problems_are_refused_with_the_reason(tmp_path: Path, reference: str, canary: str) -> None:
    problem = load_problem(write_problem(tmp_path / "p", MAKER + reference))
    with pytest.raises(ProblemError) as info:
        audit_problem(problem)
    assert "degenerate" in str(info.value) or "does not depend" in str(info.value)


def test_constant_reference_is_refused(tmp_path: Path) -> None:
    problem = load_problem(write_problem(tmp_path / "p", MAKER + "def reference(x):\n    return torch.full_like(x, 3.7)\n"))
    with pytest.raises(ProblemError, match="degenerate|does not depend"):
        audit_problem(problem)


def test_near_zero_reference_is_warned_about(tmp_path: Path) -> None:
    problem = load_problem(write_problem(tmp_path / "p", MAKER + "def reference(x):\n    return x * 1e-6\n"))
    warnings = audit_problem(problem)
    assert any("zeros passes the elementwise tolerance" in w for w in warnings)
