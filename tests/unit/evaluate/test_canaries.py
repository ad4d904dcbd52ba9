"""The load-time audit: a problem whose own checks a cheater would pass is refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SOFTMAX

from kernel_agent.evaluate.canaries import audit_problem, audit_shapes
from kernel_agent.problem.load import ProblemError, load_problem
from unit.problem.test_load import write_problem

MAKER = (
    "import torch\ndef make_inputs(shape, dtype, device, generator):\n"
    "    return (torch.randn(shape, generator=generator, dtype=dtype),)\nSHAPES = [(64, 64)]\n"
)


def test_a_healthy_problem_passes_its_audit(tmp_path: Path) -> None:
    """The refusals below are not an audit that refuses everything."""
    assert (
        audit_problem(
            load_problem(write_problem(tmp_path / "p", MAKER + "def reference(x):\n    return torch.softmax(x, -1)\n"))
        )
        == []
    )


def test_tiny_shapes_are_skipped_unless_nothing_else_is_left(tmp_path: Path) -> None:
    """A 1x1 case cannot tell zeros from the mean; the audit needs at least 16 elements."""
    assert audit_shapes(load_problem(SOFTMAX), "cpu") == [(3, 17), (37, 130), (256, 2048)]
    tiny = load_problem(
        write_problem(tmp_path / "p", MAKER.replace("(64, 64)", "(2, 2)") + "def reference(x):\n    return x * 2\n")
    )
    assert audit_shapes(tiny, "cpu") == [(2, 2)]


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
    assert f"a kernel returning {canary} passes" in str(info.value)


def test_constant_reference_is_refused(tmp_path: Path) -> None:
    problem = load_problem(
        write_problem(tmp_path / "p", MAKER + "def reference(x):\n    return torch.full_like(x, 3.7)\n")
    )
    with pytest.raises(ProblemError, match="degenerate|does not depend"):
        audit_problem(problem)


def test_near_zero_reference_is_warned_about(tmp_path: Path) -> None:
    problem = load_problem(write_problem(tmp_path / "p", MAKER + "def reference(x):\n    return x * 1e-6\n"))
    warnings = audit_problem(problem)
    assert any("zeros passes the elementwise tolerance" in w for w in warnings)
