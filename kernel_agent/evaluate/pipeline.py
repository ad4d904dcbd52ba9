"""Evaluate one candidate against one problem: the trusted verdict everything stands on.

Order of work (DESIGN.md sections 4-6):
static checks -> trusted build -> fresh inputs and references (this process,
never the candidate's) -> sandboxed candidate runs every check case -> outputs
compared here -> A/B timing against the baseline in its own sandbox, with fresh
inputs every call and a post-hoc audit of timed outputs -> statistics.

Each phase returns a record (preparation.py, verification.py, timing.py); `assemble` makes the verdict
from them, once, at the end.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

from kernel_agent.core.config import ProfileWhen
from kernel_agent.core.fingerprint import fingerprint
from kernel_agent.core.timing_result import TimingResult
from kernel_agent.core.verdict import Refusal, Status, StatusError, Verdict
from kernel_agent.evaluate import preparation
from kernel_agent.evaluate.context import EvalContext, EvalOptions, run_device, sized
from kernel_agent.evaluate.pair import SessionPair
from kernel_agent.evaluate.preparation import Built, EvaluationError, Linted, Plan, Tolerances
from kernel_agent.evaluate.timed import TimingOutcome, baseline_failure, time_candidate
from kernel_agent.evaluate.verification import CheckReport, Verifier
from kernel_agent.problem.footprint import POOL_BYTES, available_bytes, gold_fits, refusal
from kernel_agent.problem.load import Problem
from kernel_agent.problem.oracle import CaseMaker, fresh_seed
from kernel_agent.sandbox.deadline import Deadline
from kernel_agent.sandbox.host.isolation import reachable_root
from kernel_agent.sandbox.host.levels import probe
from kernel_agent.sandbox.host.session import WorkerFailure, WorkerSession, WorkerSpec
from kernel_agent.sandbox.host.shm import InputSegment, segment_bytes
from kernel_agent.sandbox.host.sweep import sweep
from kernel_agent.sandbox.protocol import Profile
from kernel_agent.timing.decision import Decision

__all__ = ["EvalOptions", "Evaluation", "EvaluationError", "evaluate", "run_device", "sized"]

LOG = logging.getLogger(__name__)
INTERPRETED = "verified under the Triton interpreter (CPU); timing needs a GPU, so no speedup is reported"


@dataclass
class Records:
    """What the phases returned so far (an evaluation that ends early has only the first few)."""

    linted: Linted | None = None
    built: Built | None = None
    tolerances: Tolerances | None = None
    verifier: Verifier | None = None
    skipped: list[dict] = field(default_factory=list)
    timing: TimingOutcome | None = None
    profile: dict[str, Any] | None = None
    candidate_output: str = ""
    freezer: str = ""


class Evaluation:
    """One candidate, one problem, one verdict. Create, then `run()`."""

    def __init__(self, problem: Problem, source: str, options: EvalOptions) -> None:
        device = run_device(problem, options.device)
        isolation = probe(options.isolation).with_limits(options.limits)
        # Each side has its own work dir, the two of the same path length (a path's length shifts the heap
        # layout, see sandbox.session.ROLE_TAGS): the candidate's sandbox binds only its own, so it never sees
        # the baseline's source, config or compiled library (THREATS C1), not even while the baseline starts.
        sandbox_root = reachable_root(options.sandbox_root, isolation)
        root = sandbox_root / f"{problem.name}-{uuid.uuid4().hex[:12]}"
        self.ctx = EvalContext(
            problem, source, options, device, isolation, sandbox_root, root, Deadline(options.timeout)
        )
        self.records = Records()
        self.durations: dict[str, float] = {}
        self.accounts: dict[str, dict] = {}
        self.ending: tuple[Status, str] = (Status.REJECTED, "")
        self.refusal: Refusal | None = None
        self.first_session = True  # the candidate's first process shares the build's allowance
        self.exchange: Any = None  # the device path's DeviceExchange, shared by both sides (DESIGN.md section 18)

    # ---- public ------------------------------------------------------------------
    def run(self) -> Verdict:
        ctx = self.ctx
        ctx.root.mkdir(parents=True, exist_ok=True)
        os.chmod(ctx.root, 0o755)
        ctx.workdir.mkdir(exist_ok=True)
        started = time.time() - 1.0  # a file system's timestamps may lag the clock by a tick
        try:
            self._run()
        except StatusError as exc:  # every stage ends the same way: a status and a one-line reason
            self.ending = (exc.status, exc.reason)
            self.refusal = exc.refusal
        except Exception as exc:  # noqa: BLE001 - whatever the candidate provoked: its verdict, never our exception
            LOG.exception("%s: the evaluation failed", ctx.problem.name)
            self.ending = (Status.REJECTED, f"the evaluation could not reach a verdict: {type(exc).__name__}: {exc}")
        finally:
            if not ctx.options.keep_workdir:
                shutil.rmtree(ctx.root, ignore_errors=True)
            sweep(ctx.isolation.uid, started)  # what the sandbox left in the host's /tmp, /var/tmp, /dev/shm
        return assemble(ctx, self.records, self.ending, self.durations, self.accounts, self.refusal)

    # ---- phases -----------------------------------------------------------------
    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Time a phase into the verdict's durations, also when it ends by a failure (a timeout counts whole)."""
        started = time.perf_counter()
        trace(f"{self.ctx.problem.name}: {name} ...")
        try:
            yield
        finally:
            self.durations[name] = self.durations.get(name, 0.0) + time.perf_counter() - started
            trace(f"{self.ctx.problem.name}: {name} ended after {time.perf_counter() - started:.2f} s")

    def _run(self) -> None:
        ctx = self.ctx
        ctx.candidate_time.start()
        with self._phase("size"):
            needed = self._size()  # a problem that cannot fit is refused here, before anything starts
        with ExitStack() as booked:
            with self._phase("memory_wait"), ctx.candidate_time.paused():  # waits while others hold the memory
                booked.enter_context(ctx.options.gate.host_memory(needed, self._host_budget))
            self._evaluate()

    def _size(self) -> int:
        """Refuse a problem that cannot fit the memory here; decide the float64 gold; what to book of the host."""
        ctx = self.ctx
        budget = self._budget_bytes()
        host = budget if budget is not None else ctx.options.gate.idle_budget(available_bytes)  # as if alone
        footprint = ctx.footprint = sized(ctx.problem)
        refused = refusal(ctx.problem, ctx.device, budget, footprint, available=host)
        if refused is not None:
            raise refused
        ctx.gold_fits = footprint is None or gold_fits(footprint, host)
        if ctx.device_data and footprint is not None:  # device memory, sized and refused like the host's
            from kernel_agent.sandbox.device.setup import check_device_memory

            budget_gb, described = ctx.options.device_memory_budget, footprint.describe()
            ctx.gold_fits = check_device_memory(footprint, ctx.problem.dtypes, budget_gb, described) and ctx.gold_fits
        if footprint is not None:
            ctx.booked = footprint.needed if ctx.gold_fits else footprint.needed_without_gold
        return ctx.booked

    def _budget_bytes(self) -> int | None:
        budget = self.ctx.options.memory_budget
        return None if budget is None else int(budget * (1 << 30))

    def _host_budget(self) -> int:
        budget = self._budget_bytes()
        return budget if budget is not None else available_bytes()

    def _prepare(self) -> tuple[Plan, SessionPair, InputSegment]:
        """Static checks, the trusted builds, the check plan and both workers' sessions (none started)."""
        ctx, records = self.ctx, self.records
        with self._phase("compile"):
            records.linted = preparation.lint(ctx)
            records.built = preparation.build(ctx, records.linted)
        with self._phase("reference"):
            plan = preparation.plan(ctx, records.built)
            records.skipped = plan.skipped
            records.tolerances = preparation.tolerances(ctx)
        records.verifier = Verifier(ctx, plan.maker, records.tolerances)
        spec = preparation.worker_spec(
            ctx, "candidate", records.built.path, ctx.problem.entry_point, records.built.prepared, plan.maker
        )
        # the baseline's build may fail: nothing has started yet
        baseline_spec = None if records.built.interpreted else preparation.baseline_spec(ctx, plan.maker)
        # One sealed input segment for both workers (each is frozen while the other runs), of the size booked.
        footprint = sized(ctx.problem)
        segment = InputSegment(segment_bytes(footprint.inputs) if footprint is not None else POOL_BYTES)
        self.segment = segment
        pair = SessionPair(self._session(spec), None if baseline_spec is None else self._session(baseline_spec))
        return plan, pair, segment

    def _session(self, spec: WorkerSpec) -> WorkerSession:
        """A worker session in its side's own work dir: the candidate's first shares the build's allowance,
        every other process gets its own from its launch."""
        ctx = self.ctx
        workdir = ctx.baseline_dir if spec.role == "baseline" else ctx.workdir
        first = spec.role == "candidate" and self.first_session
        self.first_session = self.first_session and not first
        deadline = ctx.candidate_time if first else Deadline(ctx.options.timeout)
        if ctx.device_data:
            from kernel_agent.sandbox.device.setup import new_exchange
            from kernel_agent.sandbox.host.device_session import DeviceWorkerSession

            self.exchange = self.exchange or new_exchange()
            args = (spec, workdir, ctx.isolation, ctx.limits(), deadline, self.segment)
            return DeviceWorkerSession(*args, exchange=self.exchange)
        return WorkerSession(spec, workdir, ctx.isolation, ctx.limits(), deadline, self.segment)

    def _evaluate(self) -> None:
        ctx, records, gate = self.ctx, self.records, self.ctx.options.gate
        with gate.shared(ctx.device):  # compiles and checks may overlap other evaluations'
            plan, pair, segment = self._prepare()
        try:
            with gate.shared(ctx.device):
                self._start_and_verify(pair, plan)
            if records.built is not None and records.built.interpreted:
                self.ending = (Status.CORRECT, INTERPRETED)
                return
            with ExitStack() as device:
                assert pair.baseline is not None
                with self._phase("device_wait"), pair.candidate.deadline.paused(), pair.baseline.deadline.paused():
                    device.enter_context(gate.exclusive(ctx.device))  # nothing else runs on it while it is timed
                with self._phase("timing"):
                    assert records.verifier is not None
                    records.timing = time_candidate(ctx, pair, records.verifier, plan.cases, self._session)
                decision = records.timing.decision
                self.ending = (decision.status, decision.reason)
                wanted = ctx.options.profile
                accepted = decision.status in (Status.FASTER, Status.FLAGGED)
                if wanted == ProfileWhen.ALWAYS or (wanted == ProfileWhen.FASTER and accepted):
                    with self._phase("profile"):
                        records.profile = profile(ctx, pair.candidate, plan.maker)
        finally:
            if self.exchange is not None:  # unmapped before the workers go: their memory is freed only then
                self.exchange.close()
            pair.close()
            segment.close()
            self.accounts.update(pair.accounts)

    def _start_and_verify(self, pair: SessionPair, plan: Plan) -> None:
        """Both workers started (the baseline's start overlaps the candidate's checks), every check case run."""
        records, candidate, baseline = self.records, pair.candidate, pair.baseline
        assert records.verifier is not None
        with self._phase("sandbox_start"):
            try:
                candidate.launch()
                records.freezer = candidate.accounting.freezer
                if baseline is not None:
                    with baseline_failure():
                        baseline.launch()  # its interpreter and torch import overlap the candidate's checks
                candidate.ready()
                candidate.load()
            finally:
                records.candidate_output = candidate.log_tail()
        waits = baseline.deadline.paused() if baseline is not None else nullcontext()
        with self._phase("verification"), waits:  # the baseline, started, waits for these checks
            try:
                records.verifier.verify(candidate, plan.cases)
            finally:
                records.candidate_output = candidate.log_tail()
        if baseline is not None:
            with self._phase("baseline_start"), baseline_failure():
                baseline.ready()  # before the gate is released: its start never overlaps a timing


def profile(ctx: EvalContext, candidate: WorkerSession, maker: CaseMaker) -> dict[str, Any]:
    """The candidate's operator breakdown at the first benchmark shape. It comes from the candidate's own
    process, so it is sanitized, labelled as reported, and never changes the verdict."""
    from kernel_agent.measure.op_breakdown import sanitize

    shape, dtype = ctx.problem.shapes[0], ctx.problem.dtypes[0]
    inputs = maker.inputs(shape, dtype, "normal", fresh_seed())
    try:
        reply = candidate.request(Profile(ctx.options.profile_calls, candidate.place(inputs)), "profile")
    except WorkerFailure as exc:
        return {"error": f"profile unavailable: {exc.reason}"[:300]}
    breakdown = sanitize(reply.get("breakdown"), ctx.device) if reply.get("ok") else None
    if breakdown is None:
        return {"error": f"profile unavailable: {str(reply.get('reason') or 'malformed breakdown')[:250]}"}
    return {"shape": list(shape), "dtype": dtype, **breakdown, "reported_by": "the candidate's sandboxed process"}


def assemble(
    ctx: EvalContext,
    records: Records,
    ending: tuple[Status, str],
    durations: dict[str, float],
    accounts: dict[str, dict],
    refusal: Refusal | None = None,
) -> Verdict:
    """The verdict, from what each phase returned and how the evaluation ended."""
    status, reason = ending
    isolation = ctx.isolation.describe()
    if records.freezer:
        isolation += f"; frozen between requests by {records.freezer}"
    report: CheckReport | None = records.verifier.report if records.verifier is not None else None
    verdict = Verdict(
        status=status,
        reason=" ".join(reason.split())[:1000],
        problem=ctx.problem.name,
        backend=records.linted.backend if records.linted is not None else "",
        device=ctx.device,
        isolation=isolation,
        interpreted=records.built.interpreted if records.built is not None else False,
        checks=[*records.skipped, *(report.checks if report is not None else [])],
        static=records.linted.static if records.linted is not None else [],
        tolerances=records.tolerances.to_json() if records.tolerances is not None else {},
        environment=fingerprint(ctx.device, ctx.options.threads),
        durations={k: round(v, 4) for k, v in durations.items()},
        candidate_output=records.candidate_output,
        profile=records.profile,
        accounting=dict(accounts) if accounts else None,
        refusal=refusal,
    )
    timing = records.timing
    if timing is not None:
        verdict.timing = classed(timing.estimate, timing.decision)
        verdict.roofline = timing.roofline.record
        verdict.flags = list(timing.decision.flags)
        if status == timing.decision.status:  # the timing's own verdict (not a failure after it)
            verdict.speedup, verdict.speedup_ci = timing.estimate.speedup, list(timing.estimate.speedup_ci)
    return verdict


def classed(estimate: TimingResult, decision: Decision) -> TimingResult:
    """The timing record with the four-way class the decision read from it (stored inside the timing's
    resolution: no migration)."""
    if decision.speed is None or estimate.resolution is None:
        return estimate
    said = replace(estimate.resolution, speed_class=decision.speed.value, words=decision.speed_words)
    return replace(estimate, resolution=said)


def trace(line: str) -> None:
    """With KERNEL_AGENT_TRACE=1, each phase's start and end on stderr: where a run on a lent GPU spent its time."""
    if os.environ.get("KERNEL_AGENT_TRACE") == "1":
        print(f"[trace {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def evaluate(problem: Problem, source: str, options: EvalOptions | None = None) -> Verdict:
    """Evaluate `source` as a candidate for `problem` and return the verdict."""
    return Evaluation(problem, source, options or EvalOptions()).run()
