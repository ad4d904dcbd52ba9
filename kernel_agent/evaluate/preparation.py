"""Everything before a candidate runs: its static checks, its trusted build, the check plan, the workers'
specs and the tolerances it will be held to. Each step returns a record; none writes the verdict."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path

from kernel_agent.core.comparison import Tolerance
from kernel_agent.core.verdict import Status, StatusError
from kernel_agent.evaluate.backends import detect_backend, get_backend
from kernel_agent.evaluate.backends.base import Backend, BuildFailed, Prepared
from kernel_agent.evaluate.backends.lint import defines
from kernel_agent.evaluate.context import EvalContext
from kernel_agent.evaluate.tolerance import Checked, checked_tolerance
from kernel_agent.problem.oracle import CaseMaker, CaseSpec, check_plan
from kernel_agent.sandbox.deadline import Deadline
from kernel_agent.sandbox.host.isolation import write_trusted
from kernel_agent.sandbox.host.session import WorkerSpec

INTERPRETER_MAX_ELEMENTS = 1 << 16  # larger shapes are skipped under the Triton interpreter (too slow)


class EvaluationError(StatusError):
    """Ends an evaluation early with a verdict status and a one-line reason."""


@dataclass(frozen=True)
class Linted:
    """The candidate's backend and what the static checks found (recorded even when one refuses it)."""

    backend: str
    tree: ast.Module
    static: list[dict]
    refusal: str = ""  # the first hard finding, as the verdict's reason


@dataclass(frozen=True)
class Built:
    prepared: Prepared
    path: Path  # the candidate's source in its work dir

    @property
    def interpreted(self) -> bool:
        return self.prepared.interpreted


@dataclass(frozen=True)
class Plan:
    maker: CaseMaker
    cases: list[CaseSpec]
    skipped: list[dict] = field(default_factory=list)  # cases the interpreter cannot run, recorded as unchecked


@dataclass(frozen=True)
class Tolerances:
    """Per dtype, the tolerance in force (the declared one, widened where the reference is off its own gold)."""

    declared: dict[str, Tolerance]
    checked: dict[str, Checked]

    def __call__(self, dtype: str) -> Tolerance:
        return self.checked[dtype].tolerance

    def to_json(self) -> dict[str, dict]:
        return {dtype: checked.to_json(self.declared[dtype]) for dtype, checked in self.checked.items()}


def lint(ctx: EvalContext) -> Linted:
    """The candidate parsed and scanned by its backend's static checks."""
    backend_name = ctx.options.backend or detect_backend(ctx.source)
    try:
        tree = ast.parse(ctx.source)
    except SyntaxError as exc:
        raise EvaluationError(Status.COMPILE_ERROR, f"SyntaxError: {exc.msg} (line {exc.lineno})") from None
    try:
        backend = get_backend(backend_name)
    except KeyError as exc:  # a backend named in a manifest or through the API, not on the command line
        raise EvaluationError(Status.REJECTED, str(exc.args[0])) from None
    findings = backend.lint(tree, ctx.source)
    hard = [f for f in findings if f.hard]
    refusal = ""
    if hard:
        where = f" (line {hard[0].line})" if hard[0].line else ""
        refusal = f"static check {hard[0].rule}: {hard[0].message}{where}"
    return Linted(backend_name, tree, [vars(f) for f in findings], refusal)


def build(ctx: EvalContext, linted: Linted) -> Built:
    """The candidate written into its work dir and built by the trusted side (a C++ library, Triton's mode)."""
    if linted.refusal:
        raise EvaluationError(Status.REJECTED, linted.refusal)
    if not defines(linted.tree, ctx.problem.entry_point):
        raise EvaluationError(Status.COMPILE_ERROR, f"the candidate defines no `{ctx.problem.entry_point}`")
    if linted.backend == "cuda" and ctx.device != "cuda":
        raise EvaluationError(
            Status.REJECTED, "a CUDA (load_inline) candidate needs a CUDA device; none is available here"
        )
    path = ctx.workdir / "cand.py"  # as long as base.py (see sandbox.session.ROLE_TAGS)
    write_trusted(path, ctx.source.encode())
    try:
        prepared = _prepared(get_backend(linted.backend), ctx, ctx.source, ctx.workdir / "cand", ctx.candidate_time)
    except BuildFailed as exc:
        raise EvaluationError(Status.COMPILE_ERROR, f"build failed: {exc}") from None
    return Built(prepared, path)


def _prepared(backend: Backend, ctx: EvalContext, source: str, where: Path, deadline: Deadline) -> Prepared:
    """The trusted build (raises BuildFailed: the caller says whose build it was)."""
    return backend.prepare(source, ctx.device, where, ctx.build_context(deadline))


def plan(ctx: EvalContext, built: Built) -> Plan:
    """The check cases. The interpreter runs each program instance in numpy: fewer seeds per shape, still every
    shape and distribution, and shapes too large for it recorded as unchecked."""
    maker = CaseMaker(ctx.problem, ctx.device)
    cases = check_plan(ctx.problem, 2 if built.interpreted else ctx.options.seeds_per_shape)
    skipped = []
    if built.interpreted:
        kept = []
        for case in cases:
            elements = 1
            for dim in case.shape:
                elements *= dim
            if elements <= INTERPRETER_MAX_ELEMENTS:
                kept.append(case)
            else:
                note = "skipped under the interpreter (too large); checked on a GPU"
                skipped.append({"case": case.label(), "passed": None, "note": note})
        cases = kept
    if not cases:
        raise EvaluationError(Status.REJECTED, "no check shape is small enough to verify here")
    return Plan(maker, cases, skipped)


def tolerances(ctx: EvalContext) -> Tolerances:
    problem = ctx.problem
    declared = {d: Tolerance(*problem.tolerances[d], problem.norm_tolerances[d]) for d in problem.dtypes}
    return Tolerances(declared, {d: checked_tolerance(problem, d, ctx.device) for d in problem.dtypes})


def worker_spec(
    ctx: EvalContext, role: str, source: Path, entry: str, prepared: Prepared, maker: CaseMaker
) -> WorkerSpec:
    state = None
    if ctx.problem.kind == "kernelbench":
        names, tensors = maker.state()
        state = (names, tensors, maker.init_args)
    env = {"OMP_NUM_THREADS": str(ctx.options.threads), "TORCHINDUCTOR_COMPILE_THREADS": "1", **prepared.env}
    # Neither side reads the problem's folder: the baseline's source is copied into the work dir
    # (a private folder, mode 0700, would hide the work dir below it from the sandbox uid).
    masked = (ctx.problem_dir(), ctx.sandbox_root)
    return WorkerSpec(
        role,
        source,
        entry,
        ctx.device,
        ctx.options.threads,
        env,
        prepared.extra_ro,
        masked,
        state,
        ctx.prefault_bytes(),
        ctx.booked,
        prepared.build_store,
        str(ctx.options.gpu_data),
    )


def baseline_spec(ctx: EvalContext, maker: CaseMaker) -> WorkerSpec:
    """The baseline's worker, built (its own allowance) and written into its own work dir."""
    problem = ctx.problem
    ctx.baseline_dir.mkdir(exist_ok=True)
    os.chmod(ctx.baseline_dir, 0o755)
    path = ctx.baseline_dir / "base.py"  # as long as cand.py
    write_trusted(path, problem.baseline_source.encode())
    entry = "Model" if problem.kind == "kernelbench" else "kernel"
    backend = get_backend(detect_backend(problem.baseline_source))
    try:  # trusted code: its build has its own allowance
        prepared = _prepared(
            backend, ctx, problem.baseline_source, ctx.baseline_dir / "base", Deadline(ctx.options.timeout).start()
        )
    except BuildFailed as exc:
        raise EvaluationError(Status.RUNTIME_ERROR, f"the baseline failed to build: {exc}") from None
    return worker_spec(ctx, "baseline", path, entry, prepared, maker)
