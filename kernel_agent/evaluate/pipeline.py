"""Evaluate one candidate against one problem: the trusted verdict everything stands on.

Order of work (DESIGN.md sections 4-6):
static checks -> trusted build -> fresh inputs and references (this process,
never the candidate's) -> sandboxed candidate runs every check case -> outputs
compared here -> A/B timing against the baseline in its own sandbox, with fresh
inputs every call and a post-hoc audit of timed outputs -> statistics.
"""

from __future__ import annotations

import ast
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from kernel_agent.core.config import EvalConfig
from kernel_agent.core.fingerprint import fingerprint
from kernel_agent.core.verdict import Status, StatusError, Verdict
from kernel_agent.evaluate.ab_timing import TimingJob, measure_speedup
from kernel_agent.evaluate.backends import detect_backend, get_backend
from kernel_agent.evaluate.backends.base import Backend, BuildContext, BuildFailed, Prepared
from kernel_agent.evaluate.backends.lint import defines
from kernel_agent.evaluate.compare import Tolerance, compare, compare_same_dtype
from kernel_agent.evaluate.decision import Decision, decide
from kernel_agent.evaluate.device_lock import DeviceGate, NoGate
from kernel_agent.evaluate.sandbox.isolation import Isolation, Limits, probe, write_trusted
from kernel_agent.evaluate.sandbox.session import WorkerFailure, WorkerSession, WorkerSpec
from kernel_agent.evaluate.sandbox.shm import InputSegment, nbytes
from kernel_agent.measure.confirmation import combined, needs_confirmation
from kernel_agent.problem.canaries import LOAD_AUDIT_BYTES, check_canaries
from kernel_agent.problem.footprint import Footprint, available_bytes, gold_fits, largest_footprint, refusal
from kernel_agent.problem.load import Problem, ProblemError
from kernel_agent.problem.oracle import CaseMaker, CaseSpec, check_plan, fresh_seed

INTERPRETER_MAX_ELEMENTS = 1 << 16  # larger shapes are skipped under the Triton interpreter (too slow)


# Check inputs up to this size get their references before the worker's call (cheap, and they size
# its outputs); larger ones after it, so the reference's peak never meets the worker's.
REFERENCE_FIRST_BYTES = 64 << 20


@dataclass
class EvalOptions(EvalConfig):
    """The evaluation's whole option set: what a user chooses (`EvalConfig`, declared once with its
    defaults and help) and what the harness sets on top."""

    target_block_ms: float = 100.0
    seeds_per_shape: int = 5
    build_store: Path | None = None
    limits: Limits = field(default_factory=Limits)
    audit_fraction: float = 0.2
    ceilings: Any = field(
        default=None, repr=False
    )  # measure.profile.Ceilings of this device: the roofline floor enters the decision
    profile: str = (
        "never"  # "faster" (verdicts faster or flagged) or "always": torch.profiler inside the sandbox after timing
    )
    profile_calls: int = 3
    gate: DeviceGate | NoGate = field(default_factory=NoGate, repr=False)  # shared by parallel evaluations
    trusted_source: bool = False  # a reference point (never candidate code): its work budget is recorded only

    def __post_init__(self) -> None:
        if self.threads is None:  # "all cores", resolved here: the sandbox and the fingerprint need a number
            self.threads = os.cpu_count() or 1

    @classmethod
    def from_config(cls, config: EvalConfig, **harness: Any) -> EvalOptions:
        """The user's choices (from the CLI or a stored plan), then the harness's settings over them."""
        return cls(**{**{f.name: getattr(config, f.name) for f in fields(EvalConfig)}, **harness})


class EvaluationError(StatusError):
    """Ends an evaluation early with a verdict status and a one-line reason."""


_SIZED: dict[tuple, object] = {}


def sized(problem: Problem) -> Footprint | None:
    """The problem's largest footprint, computed once per problem file (None if it cannot be built)."""
    key = (str(problem.module_path), problem.module_path.stat().st_mtime, "footprint")
    if key not in _SIZED:
        try:
            _SIZED[key] = largest_footprint(problem)
        except Exception:  # noqa: BLE001 - refusal() reports why; here it only sizes a warm-up
            _SIZED[key] = None
    return _SIZED[key]  # type: ignore[return-value]


def run_device(problem: Problem, requested: str) -> str:
    """Where the candidate runs: CPU problems on CPU; GPU problems on a GPU when there is one."""
    if problem.device == "cpu":
        return "cpu"
    if requested == "cpu":
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


class Evaluation:
    """One candidate, one problem, one verdict. Create, then `run()`."""

    def __init__(self, problem: Problem, source: str, options: EvalOptions) -> None:
        self.problem = problem
        self.source = source
        self.options = options
        self.device = run_device(problem, options.device)
        self.isolation: Isolation = probe(options.isolation).with_limits(options.limits)
        self.started = time.monotonic()
        self.durations: dict[str, float] = {}
        self.accounts: dict[str, dict] = {}  # CPU per phase of each side's sandbox, measured from outside
        # Each side has its own work dir, the two of the same path length (a path's length shifts the heap
        # layout, see sandbox.session.ROLE_TAGS): the candidate's sandbox binds only its own, so it never sees
        # the baseline's source, config or compiled library (THREATS C1), not even while the baseline starts.
        self.root = (options.sandbox_root / f"{problem.name}-{uuid.uuid4().hex[:12]}").resolve()
        self.workdir = self.root / "cand"
        self.baseline_dir = self.root / "base"
        self.verdict = Verdict(
            status="rejected",
            problem=problem.name,
            device=self.device,
            isolation=self.isolation.describe(),
            environment=fingerprint(self.device, options.threads),
        )

    # ---- public ------------------------------------------------------------------
    def run(self) -> Verdict:
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o755)
        self.workdir.mkdir(exist_ok=True)
        try:
            self._run()
        except StatusError as exc:  # every stage ends the same way: a status and a one-line reason
            self.verdict.status, self.verdict.reason = exc.status, exc.reason
        finally:
            self.verdict.durations = {k: round(v, 4) for k, v in self.durations.items()}
            if not self.options.keep_workdir:
                shutil.rmtree(self.root, ignore_errors=True)
        self.verdict.reason = " ".join(self.verdict.reason.split())[:1000]
        return self.verdict

    # ---- phases -----------------------------------------------------------------
    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Time a phase into the verdict's durations, also when it ends by a failure (a timeout counts whole)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.durations[name] = self.durations.get(name, 0.0) + time.perf_counter() - started

    def _run(self) -> None:
        with self._phase("size"):
            needed = self._size()  # a problem that cannot fit is refused here, before anything starts
        with ExitStack() as booked:
            with self._phase("memory_wait"):  # waits while others hold the memory
                booked.enter_context(self.options.gate.host_memory(needed, self._host_budget))
            self._evaluate()

    def _size(self) -> int:
        """Refuse a problem that cannot fit the memory here; decide the float64 gold; what to book of the host."""
        budget = self._budget_bytes()
        host = budget if budget is not None else self.options.gate.idle_budget(available_bytes)  # as if alone
        footprint = self._footprint = sized(self.problem)
        too_large = refusal(self.problem, self.device, budget, footprint, available=host)
        if too_large:
            raise EvaluationError("rejected", too_large)
        self._gold_fits = footprint is None or gold_fits(footprint, host)
        if footprint is None:
            return 0
        return footprint.needed if self._gold_fits else footprint.needed_without_gold

    def _budget_bytes(self) -> int | None:
        budget = self.options.memory_budget
        return None if budget is None else int(budget * (1 << 30))

    def _host_budget(self) -> int:
        budget = self._budget_bytes()
        return budget if budget is not None else available_bytes()

    def _evaluate(self) -> None:
        gate, verdict = self.options.gate, self.verdict
        with gate.shared(self.device):  # compiles and checks may overlap other evaluations'
            prepared, maker, plan, candidate_path = self._prepare()
            spec = self._spec("candidate", candidate_path, self.problem.entry_point, prepared, maker)
            baseline_spec = None if prepared.interpreted else self._baseline_spec(maker)  # may fail: nothing started
            self.segment = (
                InputSegment()
            )  # one sealed input segment for both workers: each is frozen while the other runs
            candidate = self._session(spec)
            baseline = None if baseline_spec is None else self._session(baseline_spec)
        try:
            with gate.shared(self.device):
                with self._phase("sandbox_start"):
                    try:
                        candidate.launch()
                        if baseline is not None:
                            with baseline_failure():
                                baseline.launch()  # its interpreter and torch import overlap the candidate's checks
                        candidate.ready()
                        candidate.load()
                    finally:
                        verdict.candidate_output = candidate.log_tail()
                with self._phase("verification"):
                    try:
                        self._verify(candidate, maker, plan)
                    finally:
                        verdict.candidate_output = candidate.log_tail()
                if baseline is not None:
                    with self._phase("baseline_start"), baseline_failure():
                        baseline.ready()  # before the gate is released: its start never overlaps a timing
            verdict.correct = True
            if prepared.interpreted:
                verdict.status = "correct"
                verdict.reason = (
                    "verified under the Triton interpreter (CPU); timing needs a GPU, so no speedup is reported"
                )
                return
            assert baseline is not None
            waiting = time.monotonic()
            with ExitStack() as device:
                with self._phase("device_wait"):  # nothing else runs on this device while it is timed
                    device.enter_context(gate.exclusive(self.device))
                candidate.deadline += time.monotonic() - waiting  # waiting for the device is not the candidate's time
                baseline.deadline = time.monotonic() + self.options.timeout  # trusted: a fresh allowance to time it
                with self._phase("timing"):
                    candidate = self._time(candidate, baseline, maker, plan)  # a fresh pair when a gain is confirmed
                if self.options.profile == "always" or (
                    self.options.profile == "faster" and verdict.status in ("faster", "flagged")
                ):
                    with self._phase("profile"):
                        self._profile(candidate, maker)
        finally:
            candidate.close()
            if baseline is not None and "baseline" not in self.accounts:  # closed early: the candidate failed
                baseline.close()
                self.accounts["baseline"] = baseline.accounting.to_json()
            self.segment.close()
            self.accounts["candidate"] = candidate.accounting.to_json()
            verdict.accounting = dict(self.accounts)

    def _session(self, spec: WorkerSpec) -> WorkerSession:
        """A worker session in its side's own work dir, with the whole timeout from now."""
        workdir = self.baseline_dir if spec.role == "baseline" else self.workdir
        deadline = time.monotonic() + self.options.timeout
        return WorkerSession(spec, workdir, self.isolation, self.options.limits, deadline, self.segment)

    def _baseline_spec(self, maker: CaseMaker) -> WorkerSpec:
        """The baseline's worker, built and written into its own work dir (launched beside the candidate's)."""
        self.baseline_dir.mkdir(exist_ok=True)
        os.chmod(self.baseline_dir, 0o755)
        baseline_path = self.baseline_dir / "base.py"  # as long as cand.py
        write_trusted(baseline_path, self.problem.baseline_source.encode())
        entry = "Model" if self.problem.kind == "kernelbench" else "kernel"
        self.baseline_spec = self._spec("baseline", baseline_path, entry, self._baseline_prepared(), maker)
        return self.baseline_spec

    def _prepare(self) -> tuple[Prepared, CaseMaker, list[CaseSpec], Path]:
        """Static checks, trusted build and the check plan: everything before the candidate runs."""
        problem, verdict = self.problem, self.verdict
        backend_name = self.options.backend or detect_backend(self.source)
        backend = get_backend(backend_name)
        verdict.backend = backend_name
        with self._phase("compile"):
            prepared, candidate_path = self._compile(backend, backend_name)
        with self._phase("reference"):
            maker = CaseMaker(problem, self.device)
            plan = self._plan(prepared)
        return prepared, maker, plan, candidate_path

    def _compile(self, backend: Backend, backend_name: str) -> tuple[Prepared, Path]:
        problem, verdict = self.problem, self.verdict
        try:
            tree = ast.parse(self.source)
        except SyntaxError as exc:
            raise EvaluationError("compile_error", f"SyntaxError: {exc.msg} (line {exc.lineno})") from None
        findings = backend.lint(tree, self.source)
        verdict.static = [vars(f) for f in findings]
        hard = [f for f in findings if f.hard]
        if hard:
            first = hard[0]
            where = f" (line {first.line})" if first.line else ""
            raise EvaluationError("rejected", f"static check {first.rule}: {first.message}{where}")
        if not defines(tree, problem.entry_point):
            raise EvaluationError("compile_error", f"the candidate defines no `{problem.entry_point}`")
        if backend_name == "cuda" and self.device != "cuda":
            raise EvaluationError(
                "rejected", "a CUDA (load_inline) candidate needs a CUDA device; none is available here"
            )
        candidate_path = self.workdir / "cand.py"  # as long as base.py (see sandbox.session.ROLE_TAGS)
        write_trusted(candidate_path, self.source.encode())
        try:
            prepared = backend.prepare(self.source, self.device, self.workdir / "cand", self._build_context())
        except BuildFailed as exc:
            raise EvaluationError("compile_error", f"build failed: {exc}") from None
        verdict.interpreted = prepared.interpreted
        return prepared, candidate_path

    def _plan(self, prepared: Prepared) -> list[CaseSpec]:
        # The interpreter runs each program instance in numpy: fewer seeds per shape, still every shape and
        # distribution.
        plan = check_plan(self.problem, 2 if prepared.interpreted else self.options.seeds_per_shape)
        if prepared.interpreted:
            kept = []
            for case in plan:
                elements = 1
                for dim in case.shape:
                    elements *= dim
                if elements <= INTERPRETER_MAX_ELEMENTS:
                    kept.append(case)
                else:
                    self.verdict.checks.append(
                        {
                            "case": case.label(),
                            "passed": None,
                            "note": "skipped under the interpreter (too large); checked on a GPU",
                        }
                    )
            plan = kept
        if not plan:
            raise EvaluationError("rejected", "no check shape is small enough to verify here")
        return plan

    def _tolerance(self, dtype: str) -> Tolerance:
        rtol, atol = self.problem.tolerances[dtype]
        tol = Tolerance(rtol, atol, self.problem.norm_tolerances[dtype])
        self.verdict.tolerances[dtype] = vars(tol)
        return tol

    def _spec(self, role: str, source: Path, entry: str, prepared: Prepared, maker: CaseMaker) -> WorkerSpec:
        state = None
        if self.problem.kind == "kernelbench":
            names, tensors = maker.state()
            state = (names, tensors, maker.init_args)
        env = {"OMP_NUM_THREADS": str(self.options.threads), "TORCHINDUCTOR_COMPILE_THREADS": "1", **prepared.env}
        # Neither side reads the problem's folder: the baseline's source is copied into the work dir
        # (a private folder, mode 0700, would hide the work dir below it from the sandbox uid).
        masked = (self._problem_dir(), self.options.sandbox_root.resolve())
        return WorkerSpec(
            role,
            source,
            entry,
            self.device,
            self.options.threads,
            env,
            prepared.extra_ro,
            masked,
            state,
            self._prefault_bytes(),
        )

    def _prefault_bytes(self) -> int:
        """Heap each worker backs at start, the same for both sides: a few calls' working sets and 64 MB, at most
        1 GB. No more: on a VM, huge pages beyond the host's warm memory fault in slowly (a 256 MB floor cost
        1.4-3.6 s per worker start in 4 of 6 starts here, 64 MB took 7 ms; 2026-12-03)."""
        footprint = sized(self.problem)
        per_call = footprint.inputs + footprint.outputs if footprint is not None else 0
        return min(4 * per_call + (64 << 20), 1 << 30)

    def _expected_bytes(self, maker: CaseMaker, case: CaseSpec, inputs: list[torch.Tensor]) -> int:
        """The reference's output size for a case (bounds what is read back), from the meta device when it can."""
        key = (tuple(case.shape), case.dtype)
        if key not in self.output_bytes:
            try:
                self.output_bytes[key] = nbytes(maker.reference_meta(inputs))
            except Exception:  # noqa: BLE001 - an op without a meta kernel: size it from a real reference
                self.output_bytes[key] = nbytes(maker.reference(inputs)[1])
        return self.output_bytes[key]

    def _problem_dir(self) -> Path:
        return self.problem.path if self.problem.path.is_dir() else self.problem.path.parent

    def _check_call(
        self, side: WorkerSession, inputs: list[torch.Tensor], repeat: int, out_bytes: int, label: str
    ) -> list[torch.Tensor]:
        """One check call: its outputs, read from the frozen worker, after the trusted side's own
        bitwise check that the kernel left every input as it was given."""
        reply = side.request(check_request(side, inputs, repeat, out_bytes), "check")
        refs = side.output_refs(reply, "outputs")
        devices = sorted({ref.device for ref in refs})
        if any(d != self.device for d in devices):
            raise EvaluationError("incorrect", f"outputs on {devices}, expected {self.device}")
        changed = side.unchanged(side.output_refs(reply, "inputs"), inputs)
        if changed:
            raise EvaluationError(
                "incorrect",
                f"{label}: input {changed[0]} was modified by the "
                "kernel (found by the trusted side's bitwise comparison)",
            )
        return side.read(refs, out_bytes)

    def _gold_here(self, inputs: list[torch.Tensor]) -> bool:
        """The float64 gold for this check case: wherever the largest case's gold fits the budget; else only
        where this case's share of that gold, scaled by its inputs, stays under 256 MiB (a native problem's
        small check shapes). Small inputs alone do not make a small gold: level1/60's 54 MB of inputs give
        0.8 GB of outputs and an 8 GB float64 column buffer, which the booking without the gold left out."""
        footprint = self._footprint
        if self._gold_fits or footprint is None:
            return True
        gold_bytes = footprint.needed - footprint.needed_without_gold
        return gold_bytes * nbytes(inputs) <= LOAD_AUDIT_BYTES * max(1, footprint.inputs)

    def _verify(self, candidate: WorkerSession, maker: CaseMaker, plan: list[CaseSpec]) -> None:
        """Every check case, streamed: one case's inputs and references alive at a time."""
        self.output_bytes: dict[tuple, int] = {}
        audited: set[tuple] = set()
        for index, case in enumerate(plan):
            inputs = maker.inputs(case.shape, case.dtype, case.distribution, case.seed)
            small = nbytes(inputs) <= REFERENCE_FIRST_BYTES
            use_gold = self._gold_here(inputs)
            if small:  # its references first: they size the outputs (a meta trace imports sympy, about 1 s)
                gold, base = maker.reference(inputs, gold=use_gold)
                expected = nbytes(base)
            else:
                expected = self._expected_bytes(maker, case, inputs)
            runs = []
            for repeat in range(2 if index == 0 else 1):
                try:
                    runs.append(self._check_call(candidate, inputs, repeat, expected, case.label()))
                except WorkerFailure as exc:
                    raise WorkerFailure(exc.status, f"{case.label()}: {exc.reason}") from None
            if not small:  # after the worker's call: the two peaks never coincide
                gold, base = maker.reference(inputs, gold=use_gold)
            self.output_bytes[(tuple(case.shape), case.dtype)] = nbytes(base)
            config = (tuple(case.shape), case.dtype)
            if nbytes(inputs) + nbytes(base) > LOAD_AUDIT_BYTES and config not in audited:
                audited.add(config)  # too large to audit at load: the canaries run on this case
                try:
                    check_canaries(self.problem, gold, base, inputs, self._tolerance(case.dtype), case.label())
                except ProblemError as exc:
                    raise EvaluationError("rejected", str(exc)) from None
            if use_gold:
                result = compare(runs[0], gold, base, self._tolerance(case.dtype))
            else:  # as a large timed call's audit
                result = compare_same_dtype(runs[0], base, self._tolerance(case.dtype))
            errors = {
                "max_abs_error": result.max_abs_error,
                "rel_norm_error": result.rel_norm_error,
                "base_max_abs_error": result.base_max_abs_error,
            }
            if not use_gold:
                errors["reference"] = "same-dtype (a float64 gold would not fit the memory budget)"
            self.verdict.checks.append({"case": case.label(), "passed": result.passed, **errors})
            if not result.passed:
                assert result.mismatch is not None
                raise EvaluationError("incorrect", f"{case.label()}: {result.mismatch.line()}")
            if len(runs) == 2 and not all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(runs[0], runs[1])):
                raise EvaluationError(
                    "incorrect",
                    f"{case.label()}: two runs on the same input gave different "
                    "bits (nondeterministic or reads uninitialised memory)",
                )

    def _time(
        self, candidate: WorkerSession, baseline: WorkerSession, maker: CaseMaker, plan: list[CaseSpec]
    ) -> WorkerSession:
        """The A/B timing and the decision; a small gain is timed again on a fresh pair of processes
        (measure/confirmation.py). Returns the candidate session in use afterwards."""
        options, verdict = self.options, self.verdict
        estimate, raised = self._time_against(baseline, candidate, maker, plan)
        decision = self._decide(estimate, raised)
        if decision.status is Status.FASTER and needs_confirmation(estimate, options.min_gain):
            candidate.close()
            self.accounts["first_pair_candidate"] = candidate.accounting.to_json()
            self.accounts["first_pair_baseline"] = self.accounts.pop("baseline")
            candidate, baseline = self._session(candidate.spec), self._session(self.baseline_spec)
            try:
                candidate.launch()
                baseline.launch()  # the two start together, as the first pair did
                candidate.ready()
                candidate.load()
                self._replay_checks(candidate, maker, plan)  # the same process history as the fresh baseline's
                with baseline_failure():
                    baseline.ready()
                second, more = self._time_against(baseline, candidate, maker, plan)
            except BaseException:
                candidate.close()  # run() closes only the session this method returns
                if "baseline" not in self.accounts:
                    baseline.close()
                    self.accounts["baseline"] = baseline.accounting.to_json()
                raise
            estimate, raised = combined(estimate, second, options.min_gain), raised + more
            decision = self._decide(estimate, raised)
        verdict.timing = estimate
        verdict.speedup, verdict.speedup_ci = estimate["speedup"], list(estimate["speedup_ci"])
        verdict.status, verdict.reason, verdict.flags = decision.status.value, decision.reason, list(decision.flags)
        return candidate

    def _decide(self, estimate: dict, raised: list[str]) -> Decision:
        options = self.options
        return decide(estimate, raised, options.min_gain, options.sanity_speedup, self._roofline(estimate))

    def _time_against(
        self, baseline: WorkerSession, candidate: WorkerSession, maker: CaseMaker, plan: list[CaseSpec]
    ) -> tuple[dict, list[str]]:
        """One pair: a ready baseline process against `candidate`, with the same check history first.
        The baseline is closed here, whatever happens, and its accounting kept."""
        problem, options = self.problem, self.options
        try:
            with baseline_failure():
                baseline.load()
                self._replay_checks(baseline, maker, plan)
            configs = [(tuple(shape), dtype) for dtype in problem.dtypes for shape in problem.shapes]
            missing = [c for c in configs if c not in self.output_bytes]
            if missing:
                raise EvaluationError(
                    "rejected",
                    f"no checked case for shape {list(missing[0][0])} {missing[0][1]}: cannot audit its timed outputs",
                )
            job = TimingJob(
                configs=configs,
                maker=maker,
                candidate=candidate,
                baseline=baseline,
                device=self.device,
                threads=options.threads,
                rounds=options.timing_rounds,
                target_block_ms=options.target_block_ms,
                audit_fraction=options.audit_fraction,
                timeout=options.timeout,
                tolerance=self._tolerance,
                output_bytes=self.output_bytes,
                min_gain=options.min_gain,
                sequential=options.sequential,
                enforce_work_budget=not options.trusted_source,  # the timer rule still applies: it could flatter us
            )
            return measure_speedup(job)
        finally:
            baseline.close()  # before its accounting is read: the peak memory is read at close
            self.accounts["baseline"] = baseline.accounting.to_json()

    def _roofline(self, estimate: dict) -> list[dict]:
        """Work, ceilings and floors per benchmark shape on this device (stored for the report's chart);
        [] without ceilings. Advice for the decision's floor check, never a reason to fail."""
        ceilings = self.options.ceilings
        if ceilings is None:
            return []
        try:
            from kernel_agent.measure.profile import roofline_record, shape_rows

            rows = shape_rows(self.problem, estimate, ceilings)
        except Exception:  # noqa: BLE001 - a floor that cannot be computed changes nothing
            return []
        self.verdict.roofline = roofline_record(rows, ceilings)
        return rows

    def _profile(self, candidate: WorkerSession, maker: CaseMaker) -> None:
        """The candidate's operator breakdown at the first benchmark shape. It comes from the
        candidate's own process, so it is sanitized, labelled as reported, and never changes the verdict."""
        from kernel_agent.measure.op_breakdown import sanitize

        shape, dtype = self.problem.shapes[0], self.problem.dtypes[0]
        inputs = maker.inputs(shape, dtype, "normal", fresh_seed())
        try:
            reply = candidate.request(
                {"cmd": "profile", "calls": self.options.profile_calls, **candidate.place(inputs)}, "profile"
            )
        except WorkerFailure as exc:
            self.verdict.profile = {"error": f"profile unavailable: {exc.reason}"[:300]}
            return
        breakdown = sanitize(reply.get("breakdown"), self.device) if reply.get("ok") else None
        if breakdown is None:
            self.verdict.profile = {
                "error": f"profile unavailable: {str(reply.get('reason') or 'malformed breakdown')[:250]}"
            }
            return
        self.verdict.profile = {
            "shape": list(shape),
            "dtype": dtype,
            **breakdown,
            "reported_by": "the candidate's sandboxed process",
        }

    def _replay_checks(self, baseline: WorkerSession, maker: CaseMaker, plan: list[CaseSpec]) -> None:
        """Give the baseline's process the same history as the candidate's (the same check calls,
        redrawn from the same seeds), so allocator and cache state do not differ between the two sides."""
        for index, case in enumerate(plan):
            inputs = maker.inputs(case.shape, case.dtype, case.distribution, case.seed)
            out_bytes = self.output_bytes.get((tuple(case.shape), case.dtype), 0)
            for repeat in range(2 if index == 0 else 1):
                baseline.request(check_request(baseline, inputs, repeat, out_bytes), "check")

    def _build_context(self, deadline: float | None = None) -> BuildContext:
        """Builds run under the evaluation's limits and never past its timeout."""
        store = self.options.build_store or default_build_store()
        return BuildContext(
            store=store,
            isolation=self.isolation,
            sandbox_root=self.options.sandbox_root.resolve(),
            deadline=deadline or self.started + self.options.timeout,
            limits=self.options.limits,
        )

    def _baseline_prepared(self) -> Prepared:
        baseline_backend = detect_backend(self.problem.baseline_source)
        try:
            return get_backend(baseline_backend).prepare(
                self.problem.baseline_source,
                self.device,
                self.baseline_dir / "base",
                self._build_context(time.monotonic() + self.options.timeout),
            )
        except BuildFailed as exc:
            raise EvaluationError("runtime_error", f"the baseline failed to build: {exc}") from None


@contextmanager
def baseline_failure() -> Iterator[None]:
    """The baseline's own failure (it is trusted code) is the evaluation's runtime error, not the candidate's."""
    try:
        yield
    except WorkerFailure as exc:
        raise EvaluationError("runtime_error", f"the baseline itself failed: {exc.reason}") from None


def default_build_store() -> Path:
    from kernel_agent.cpp import default_store

    return default_store()


def check_request(side: WorkerSession, inputs: list[torch.Tensor], repeat: int, out_bytes: int) -> dict:
    """A check call's request: its inputs placed, allocator memory poisoned first (NaN, then another sentinel)."""
    return {
        "cmd": "check",
        "poison_bytes": out_bytes,
        "poison_value": float("nan") if repeat == 0 else -7.0e37,
        **side.place(inputs),
    }


def evaluate(problem: Problem, source: str, options: EvalOptions | None = None) -> Verdict:
    """Evaluate `source` as a candidate for `problem` and return the verdict."""
    return Evaluation(problem, source, options or EvalOptions()).run()
