"""The check calls: every case of the plan through the candidate's sandbox, its outputs read out of the frozen
worker and judged here (DESIGN.md section 4). Audited timed calls are held to the same judge."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kernel_agent.core.comparison import Tolerance
from kernel_agent.core.verdict import Status
from kernel_agent.evaluate.canaries import LOAD_AUDIT_BYTES, check_canaries
from kernel_agent.evaluate.compare import Comparison, compare, compare_same_dtype
from kernel_agent.evaluate.context import EvalContext
from kernel_agent.evaluate.preparation import EvaluationError, Tolerances
from kernel_agent.problem.load import ProblemError
from kernel_agent.problem.oracle import CaseMaker, CaseSpec
from kernel_agent.sandbox.host.session import WorkerFailure, WorkerSession
from kernel_agent.sandbox.host.shm import ExpectedOutput, expected_outputs, nbytes
from kernel_agent.sandbox.protocol import Check

# Check inputs up to this size get their references before the worker's call (cheap, and they size
# its outputs); larger ones after it, so the reference's peak never meets the worker's.
REFERENCE_FIRST_BYTES = 64 << 20
HARD_MARGIN = 16  # a hard draw's atol and norm: at least this times the reference's own error on it

Config = tuple[tuple[int, ...], str]  # (shape, dtype)


@dataclass
class CheckReport:
    """What the checks found (kept as it grows: a failing case is recorded before the evaluation ends on it)."""

    checks: list[dict] = field(default_factory=list)
    expected: dict[Config, tuple[ExpectedOutput, ...]] = field(default_factory=dict)  # each config's outputs


class Verifier:
    """Checks and judges for one evaluation: the same judge for check calls and audited timed calls."""

    def __init__(self, ctx: EvalContext, maker: CaseMaker, tolerances: Tolerances) -> None:
        self.ctx, self.maker, self.tolerances = ctx, maker, tolerances
        self.report = CheckReport()

    def verify(self, candidate: WorkerSession, cases: list[CaseSpec]) -> CheckReport:
        """Every check case, streamed: one case's inputs and references alive at a time."""
        audited: set[Config] = set()
        for index, case in enumerate(cases):
            inputs = self.maker.inputs(case.shape, case.dtype, case.distribution, case.seed)
            small = nbytes(inputs) <= REFERENCE_FIRST_BYTES
            use_gold = self.ctx.gold_here(inputs)
            if small:  # its references first: they size the outputs (a meta trace imports sympy, about 1 s)
                gold, base = self.maker.reference(inputs, gold=use_gold)
                expected = expected_outputs(base)
            else:
                expected = self._expected(case, inputs)
            runs = []
            for repeat in range(2 if index == 0 else 1):
                try:
                    runs.append(self._check_call(candidate, inputs, repeat, expected, case.label()))
                except WorkerFailure as exc:
                    raise WorkerFailure(exc.status, f"{case.label()}: {exc.reason}") from None
            if not small:  # after the worker's call: the two peaks never coincide
                gold, base = self.maker.reference(inputs, gold=use_gold)
            config = (tuple(case.shape), case.dtype)
            self.report.expected[config] = expected_outputs(base)
            if nbytes(inputs) + nbytes(base) > LOAD_AUDIT_BYTES and config not in audited:
                audited.add(config)  # too large to audit at load: the canaries run on this case
                try:
                    check_canaries(self.ctx.problem, gold, base, inputs, self.tolerances(case.dtype), case.label())
                except ProblemError as exc:
                    raise EvaluationError(Status.REJECTED, str(exc)) from None
            if case.hard:
                tolerance, outside = self._hard_tolerance(gold, base, use_gold, case.dtype)
                if tolerance is None:  # not held against the candidate: the reference itself cannot say what is right
                    self.report.checks.append({"case": case.label(), "passed": None, "note": outside})
                    continue
                result = compare(runs[0], gold, base, tolerance, precision=False)
            else:
                result = self.compare(runs[0], gold, base, use_gold, case.dtype)
            self._record(case, runs, result, use_gold)
        return self.report

    def _hard_tolerance(self, gold: tuple, base: tuple, use_gold: bool, dtype: str) -> tuple[Tolerance | None, str]:
        """What a hard draw is judged with, or None and why it is past the reference's own range: the float64
        gold is not finite on it, or the same-dtype reference fails its own tolerance there.

        Judged by (a), (c) and the NaN rule, not (b), with atol and the norm raised to HARD_MARGIN times the
        reference's own error on this draw: at these magnitudes an honest kernel summing in another order may
        be several times the reference's error (a float32 matmul of inputs near 100 cancelling to -5 was off by
        0.01 with the reference inside 6e-4), while a formula that breaks is off by orders of magnitude more
        (E[x^2] - E[x]^2 at the offset draw: about offset / spread = 150 times the reference's error) or NaN."""
        if not use_gold:
            return None, "not checked: a hard draw needs the float64 gold, which does not fit the memory budget"
        if any(g.is_floating_point() and not bool(torch.isfinite(g).all()) for g in gold):
            return None, "not checked: the float64 reference is not finite on this draw"
        declared = self.tolerances(dtype)
        own = compare(base, gold, base, declared, precision=False)
        if not own.passed:
            return None, "not checked: the same-dtype reference fails its own tolerance on this draw"
        atol = max(declared.atol, HARD_MARGIN * own.max_abs_error)
        return Tolerance(declared.rtol, atol, max(declared.norm, HARD_MARGIN * own.rel_norm_error)), ""

    def _record(self, case: CaseSpec, runs: list, result: Comparison, use_gold: bool) -> None:
        errors = {
            "max_abs_error": result.max_abs_error,
            "rel_norm_error": result.rel_norm_error,
            "base_max_abs_error": result.base_max_abs_error,
        }
        if not use_gold:
            errors["reference"] = "same-dtype (a float64 gold would not fit the memory budget)"
        if result.reference_nonfinite:
            errors["reference_nonfinite"] = result.reference_nonfinite  # judged against the float64 gold alone
        self.report.checks.append({"case": case.label(), "passed": result.passed, **errors})
        if not result.passed:
            assert result.mismatch is not None
            raise EvaluationError(Status.INCORRECT, f"{case.label()}: {result.mismatch.line()}")
        if len(runs) == 2 and not all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(runs[0], runs[1])):
            raise EvaluationError(
                Status.INCORRECT,
                f"{case.label()}: two runs on the same input gave different "
                "bits (nondeterministic or reads uninitialised memory)",
            )

    def _expected(self, case: CaseSpec, inputs: list[torch.Tensor]) -> tuple[ExpectedOutput, ...]:
        """The reference's outputs for a case (what a description must match before it is read), from the meta
        device when it can."""
        key = (tuple(case.shape), case.dtype)
        if key not in self.report.expected:
            try:
                self.report.expected[key] = expected_outputs(self.maker.reference_meta(inputs))
            except Exception:  # noqa: BLE001 - an op without a meta kernel: size it from a real reference
                self.report.expected[key] = expected_outputs(self.maker.reference(inputs)[1])
        return self.report.expected[key]

    def _check_call(
        self,
        side: WorkerSession,
        inputs: list[torch.Tensor],
        repeat: int,
        expected: tuple[ExpectedOutput, ...],
        label: str,
    ) -> list[torch.Tensor]:
        """One check call: its outputs, read from the frozen worker, after the trusted side's own
        bitwise check that the kernel left every input as it was given."""
        reply = side.request(check_request(side, inputs, repeat, expected), "check")
        refs = side.output_refs(reply, "outputs")
        devices = sorted({ref.device for ref in refs})
        if any(d != self.ctx.device for d in devices):
            raise EvaluationError(Status.INCORRECT, f"outputs on {devices}, expected {self.ctx.device}")
        changed = side.unchanged(side.output_refs(reply, "inputs"), inputs)
        if changed:
            raise EvaluationError(
                Status.INCORRECT,
                f"{label}: input {changed[0]} was modified by the "
                "kernel (found by the trusted side's bitwise comparison)",
            )
        return side.read(refs, expected)

    def judge(self, inputs: list[torch.Tensor], outputs: list[torch.Tensor], dtype: str) -> Comparison:
        """An audited timed call's outputs, held to what a check call of its size is held to."""
        use_gold = self.ctx.gold_here(inputs)
        where = outputs[0].device.type if outputs else "cpu"  # the device path compares on the device
        gold, base = self.maker.reference(inputs, gold=use_gold, where=where)
        return self.compare(outputs, gold, base, use_gold, dtype)

    def compare(self, outputs: list[torch.Tensor], gold: tuple, base: tuple, use_gold: bool, dtype: str) -> Comparison:
        """The float64 gold and the precision rule wherever the gold fits the memory budget; else the same-dtype
        reference at twice the tolerances (its own rounding counts once more). Checks and audits alike."""
        if use_gold:
            return compare(outputs, gold, base, self.tolerances(dtype))
        return compare_same_dtype(outputs, base, self.tolerances(dtype))

    def replay(self, baseline: WorkerSession, cases: list[CaseSpec]) -> None:
        """Give the baseline's process the same history as the candidate's (the same check calls,
        redrawn from the same seeds), so allocator and cache state do not differ between the two sides."""
        for index, case in enumerate(cases):
            inputs = self.maker.inputs(case.shape, case.dtype, case.distribution, case.seed)
            expected = self.report.expected.get((tuple(case.shape), case.dtype), ())
            for repeat in range(2 if index == 0 else 1):
                baseline.request(check_request(baseline, inputs, repeat, expected), "check")


def check_request(
    side: WorkerSession, inputs: list[torch.Tensor], repeat: int, expected: tuple[ExpectedOutput, ...]
) -> Check:
    """A check call's request: its inputs placed, allocator memory poisoned first (NaN, then another sentinel)."""
    return Check(
        poison_bytes=sum(e.nbytes for e in expected),
        poison_value=float("nan") if repeat == 0 else -7.0e37,
        placed=side.place(inputs),
    )
