"""Refuse problems whose own checks a cheater would pass (THREATS.md rows 3-6).

For each dtype and each shape worth checking: zeros, ones, the mean, random
values, "uninitialised" values and input passthrough must all fail the checker,
and the reference output must change with the inputs.
"""

from __future__ import annotations

import torch

from kernel_agent.evaluate.compare import Tolerance, canary_outputs, compare
from kernel_agent.problem.footprint import largest_footprint, refusal
from kernel_agent.problem.load import Problem, ProblemError
from kernel_agent.problem.oracle import CaseMaker, fresh_seed

# Skip shapes whose dims multiply past this: float64 references of GPU-sized shapes take minutes on a CPU.
MAX_AUDIT_WORK = {"cpu": 1 << 21, "cuda": 1 << 27}


def audit_shapes(problem: Problem, device: str) -> list[tuple[int, ...]]:
    shapes = []
    for shape in problem.all_check_shapes():
        work = 1
        for dim in shape:
            work *= dim
        if 16 <= work <= MAX_AUDIT_WORK[device]:
            shapes.append(shape)
    return shapes or problem.all_check_shapes()[-1:]


LOAD_AUDIT_BYTES = 256 << 20  # one call's inputs + outputs past this: the canaries run inside each evaluation instead


def check_canaries(
    problem: Problem, gold: tuple, base: tuple, inputs: list[torch.Tensor], tol: Tolerance, where: str
) -> list[str]:
    """Raise ProblemError when a cheater's output (zeros, ones, the mean, ...) passes this case; return
    warnings for canaries that pass only the elementwise rule (the normwise rules still reject them)."""
    warnings = []
    for name, outputs in canary_outputs(gold, base, inputs):
        result = compare(outputs, gold, base, tol, exhaustive=False)
        if not result.passed and result.mismatch is not None and result.mismatch.check != "allclose":
            warnings.append(
                f"{problem.name}: a kernel returning {name} passes the elementwise "
                f"tolerance on {where}; only the normwise rules reject it"
            )
        if result.passed:
            raise ProblemError(
                f"{problem.name}: degenerate for its own checks: a kernel returning {name} passes "
                f"({where}); change the input scale or distribution, or tighten TOLERANCES"
            )
    return warnings


def audit_problem(problem: Problem, device: str = "cpu") -> list[str]:
    """Raise ProblemError naming the first canary that passes; return warnings.

    A problem too large for this machine is left to the evaluation (which refuses it with the
    numbers); one too large to audit quickly here is audited inside each evaluation, on the
    check cases it streams anyway.
    """
    if refusal(problem, device) is not None:
        return []
    footprint = largest_footprint(problem)
    if footprint.inputs + footprint.outputs > LOAD_AUDIT_BYTES:
        return [
            f"{problem.name}: too large to audit at load "
            f"({footprint.describe()}); the canaries run inside each evaluation"
        ]
    maker = CaseMaker(problem, device)
    warnings: list[str] = []
    for dtype in problem.dtypes:
        rtol, atol = problem.tolerances[dtype]
        tol = Tolerance(rtol, atol, problem.norm_tolerances[dtype])
        for shape in audit_shapes(problem, device):
            golds = []
            for distribution in problem.distributions:
                inputs = maker.inputs(shape, dtype, distribution, fresh_seed())
                gold, base = maker.reference(inputs)
                golds.append(gold)
                warnings += check_canaries(
                    problem, gold, base, inputs, tol, f"shape {list(shape)}, {dtype}, {distribution} inputs"
                )
            again, _ = maker.reference(maker.inputs(shape, dtype, problem.distributions[0], fresh_seed()))
            if problem.kind == "native" and all(torch.equal(a, b) for a, b in zip(golds[0], again)):
                raise ProblemError(
                    f"{problem.name}: the reference output does not depend on "
                    f"the inputs (shape {list(shape)}); a constant would pass"
                )
    return sorted(set(warnings))
