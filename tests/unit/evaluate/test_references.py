"""The trusted sources of the reference points: the problem's own file, an entry point, and nothing a
candidate wrote; each passes the static checks a candidate goes through."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from kernel_agent.core.verdict import Verdict
from kernel_agent.evaluate.backends import get_backend
from kernel_agent.evaluate.backends.lint import defines
from kernel_agent.evaluate.references import (
    KINDS,
    Reference,
    ReferenceKind,
    point_of,
    reference_job,
    reference_source,
    references,
)
from kernel_agent.problem.load import load_problem

ROOT = Path(__file__).resolve().parents[3]
PROBLEMS = [
    ROOT / "examples" / "cpp_softmax",
    ROOT / "examples" / "torch_opchain",
    ROOT / "examples" / "cpp_gelu_layernorm",
    ROOT / "examples" / "cpp_cross_entropy",
    ROOT / "examples" / "cpp_adamw",
    ROOT / "examples" / "kernelbench" / "level1_layernorm_mlp.py",
    ROOT / "tests" / "fixtures" / "kernelbench" / "kb_rowloop.py",
    ROOT / "tests" / "fixtures" / "uncompilable",
]


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: p.name)
@pytest.mark.parametrize("kind", references(["max-autotune-no-cudagraphs"]), ids=str)
def test_each_reference_source_is_the_problem_file_and_passes_the_static_checks(path: Path, kind) -> None:
    problem = load_problem(path)
    source = reference_source(problem, kind)
    assert source.startswith(problem.reference_source.rstrip("\n"))
    tree = ast.parse(source)
    assert defines(tree, problem.entry_point)
    assert not [f for f in get_backend("torch").lint(tree, source) if f.hard]
    assert ("torch.compile(" in source) == (kind.kind == ReferenceKind.COMPILE)
    assert ("mode='max-autotune-no-cudagraphs'" in source) == (kind.mode == "max-autotune-no-cudagraphs")


def test_a_kernelbench_files_eager_point_is_its_model() -> None:
    problem = load_problem(ROOT / "tests" / "fixtures" / "kernelbench" / "kb_rowloop.py")
    assert reference_source(problem, Reference(ReferenceKind.EAGER)).endswith("\nModelNew = Model\n")
    namespace: dict = {}
    exec(compile(reference_source(problem, Reference(ReferenceKind.COMPILE)), "ref", "exec"), namespace)  # noqa: S102
    model = namespace["ModelNew"](16)
    assert isinstance(model, namespace["Model"])  # the Model itself: its state dict keys are the reference's
    assert set(model.state_dict()) == {"scale", "shift"}


def test_a_job_checks_only_the_benchmark_shapes_with_the_torch_backend() -> None:
    from kernel_agent.evaluate.pipeline import EvalOptions

    problem = load_problem(ROOT / "examples" / "cpp_softmax")
    job = reference_job(problem, Reference(ReferenceKind.COMPILE), EvalOptions(threads=1, profile="always"))
    assert job.problem.check_shapes == [] and job.problem.shapes == problem.shapes
    assert job.options.backend == "torch" and job.options.profile == "never"
    assert job.options.sequential is False  # a stored point is timed every round: its interval divides every speedup


def test_a_failed_reference_is_a_point_with_its_reason() -> None:
    verdict = Verdict(status="runtime_error", reason="TorchRuntimeError: no fake impl registered")
    point = point_of(Reference(ReferenceKind.COMPILE), verdict)
    assert point.speedup is None and point.reason == "TorchRuntimeError: no fake impl registered"
    assert type(point).from_json(point.to_json()) == point


def test_compile_modes_add_named_points_after_eager_and_compile() -> None:
    found = references(["max-autotune-no-cudagraphs", "default", "max-autotune-no-cudagraphs", "reduce-overhead"])
    names = ["eager", "compile", "compile:max-autotune-no-cudagraphs", "compile:reduce-overhead"]
    assert [r.value for r in found] == names
    assert found[:2] == KINDS
    assert all(Reference.of(r.value) == r for r in found)
    with pytest.raises(ValueError, match="unknown torch.compile mode 'fast'"):
        references(["fast"])  # never reaches the generated source


def test_a_compile_mode_point_runs_in_that_mode_and_matches_the_reference() -> None:
    import torch

    problem = load_problem(ROOT / "examples" / "torch_opchain")
    namespace: dict = {}
    source = reference_source(problem, Reference(ReferenceKind.COMPILE, "max-autotune-no-cudagraphs"))
    exec(compile(source, "ref", "exec"), namespace)  # noqa: S102
    inputs = problem.module.make_inputs((8, 64), torch.float32, "cpu", torch.Generator().manual_seed(0))
    torch.testing.assert_close(namespace["kernel"](*inputs), namespace["reference"](*inputs))


def test_extra_modes_stand_beside_eager_and_compile_in_speedup_vs() -> None:
    from kernel_agent.core.relative import Relative, speedups_vs

    point = {"kind": "compile:max-autotune-no-cudagraphs", "status": "faster", "speedup": 4.0, "ci": [3.5, 4.5]}
    shown = speedups_vs(Relative(2.0, (1.8, 2.2)), {"compile:max-autotune-no-cudagraphs": point})
    assert list(shown) == ["baseline", "eager", "compile", "compile:max-autotune-no-cudagraphs"]
    assert shown["compile:max-autotune-no-cudagraphs"].value == pytest.approx(0.5)
