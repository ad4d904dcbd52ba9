"""The checks a region's problem passes before it is emitted (and again under `regions --check`): the folder
loads; on the captured inputs the reference gives the model's captured values bit for bit; the float64 gold is
float64 and the reference's error against it is within the problem's tolerance; the baseline equals the
reference; the canaries (cheater outputs) are refused; the problem fits the memory budget here."""

from __future__ import annotations

from pathlib import Path

import torch

from kernel_agent.evaluate.canaries import audit_problem
from kernel_agent.evaluate.compare import Tolerance, compare
from kernel_agent.problem.footprint import refusal
from kernel_agent.problem.load import Problem, ProblemError, as_outputs, import_file, load_problem
from kernel_agent.problem.oracle import CaseMaker


class CheckFailed(ValueError):
    """The first check a problem fails: one line."""


def check_folder(folder: Path, captured: list[tuple[list[torch.Tensor], list[torch.Tensor]]] | None) -> list[str]:
    """Run every check; raise CheckFailed with the first failure; return warnings. `captured` holds (inputs,
    outputs) of the model per label (None under --check from a folder alone: that check needs the model)."""
    try:
        problem = load_problem(folder)
    except ProblemError as exc:
        raise CheckFailed(f"does not load: {exc}") from None
    assert problem.module is not None
    if captured is not None:
        for k, (inputs, outputs) in enumerate(captured):
            with torch.no_grad():
                got = as_outputs(problem.module.reference(*inputs))
            if len(got) != len(outputs) or not all(_same(a, b) for a, b in zip(got, outputs)):
                diff = max((float((a.double() - b.double()).abs().max()) for a, b in zip(got, outputs)), default=-1.0)
                raise CheckFailed(
                    f"the reference on the captured inputs of label {k} differs from the model's values "
                    f"(max abs diff {diff:.3g}; the same ops should give the same bits)"
                )
    _gold_and_baseline(problem, folder)
    stop = refusal(problem, "cpu")
    if stop is not None:
        raise CheckFailed(f"does not fit here: {stop}")
    try:
        return audit_problem(problem, "cpu")
    except ProblemError as exc:
        raise CheckFailed(f"canaries: {exc}") from None


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit, a NaN equal to a NaN in the same place (rsqrt of a negative draw gives one on both sides)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    return bool(((a == b) | (a.isnan() & b.isnan())).all())


def _gold_and_baseline(problem: Problem, folder: Path) -> None:
    maker = CaseMaker(problem, "cpu")
    kernel = import_file(folder / "kernel.py", f"kernel_agent_region_baseline_{abs(hash(str(folder)))}").kernel
    dtype = problem.dtypes[0]
    rtol, atol = problem.tolerances[dtype]
    tol = Tolerance(rtol, atol, problem.norm_tolerances[dtype])
    for shape in problem.all_check_shapes():
        inputs = maker.inputs(shape, dtype, problem.distributions[0], 12345)
        gold, base = maker.reference(inputs)
        wrong = [str(g.dtype) for g in gold if g.is_floating_point() and g.dtype != torch.float64]
        if wrong:
            raise CheckFailed(
                f"the float64 gold at shape {list(shape)} came out as {', '.join(wrong)}: a dtype literal downcasts it"
            )
        result = compare(base, gold, base, tol)
        if not result.passed:
            raise CheckFailed(
                f"the {dtype} reference misses its own float64 gold at shape {list(shape)}: "
                f"{result.mismatch.line() if result.mismatch else 'mismatch'}"
            )
        with torch.no_grad():
            again = as_outputs(kernel(*[t.clone() for t in inputs]))
        if len(again) != len(base) or not all(_same(a, b) for a, b in zip(again, base)):
            raise CheckFailed(f"the baseline differs from the reference at shape {list(shape)}")
