"""The timed part of a verdict: the A/B timing of a verified candidate against its baseline, a second pair
of processes for a small gain (timing/confirmation.py), a second look on several pairs for a gain one pair
could not resolve, the roofline rows and the decision."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kernel_agent.core.timing_result import Processes, SetAside, TimingResult, combined
from kernel_agent.core.verdict import Status
from kernel_agent.evaluate.context import EvalContext, sized
from kernel_agent.evaluate.pair import SessionPair
from kernel_agent.evaluate.preparation import EvaluationError
from kernel_agent.evaluate.verification import Verifier
from kernel_agent.measure.roofline import RooflineRow
from kernel_agent.problem.load import Problem
from kernel_agent.problem.oracle import CaseSpec
from kernel_agent.sandbox.host.session import WorkerFailure, WorkerSession, WorkerSpec
from kernel_agent.timing.ab_timing import TimingJob, measure_speedup
from kernel_agent.timing.confirmation import needs_confirmation, reason_for
from kernel_agent.timing.decision import Decision, decide
from kernel_agent.timing.speed_class import SpeedClass


@dataclass(frozen=True)
class Roofline:
    rows: list[RooflineRow]  # per benchmark shape: work, floor, each side's time (the decision reads them)
    record: dict[str, Any] | None  # what the verdict stores for the report's chart


@dataclass(frozen=True)
class TimingOutcome:
    estimate: TimingResult
    decision: Decision
    roofline: Roofline


@contextmanager
def baseline_failure() -> Iterator[None]:
    """The baseline's own failure (it is trusted code) is the evaluation's runtime error, not the candidate's."""
    try:
        yield
    except WorkerFailure as exc:
        raise EvaluationError(Status.RUNTIME_ERROR, f"the baseline itself failed: {exc.reason}") from None


REPLICATE_BELOW = 64 << 20  # a working set up to this many bytes may be timed on several pairs of processes
RESOLUTION = {"cpu": 0.03, "cuda": 0.01}  # --resolution's default per device


@dataclass(frozen=True)
class PairPlan:
    count: int  # pairs of processes that time the candidate
    why_one: str = ""  # why one pair where --processes asked for more ('' otherwise)


def process_pairs(ctx: EvalContext) -> PairPlan:
    """How many pairs of processes time this candidate (pair_plan)."""
    return pair_plan(ctx.problem, ctx.device, ctx.options.processes)


def pair_plan(problem: Problem, device: str, processes: int) -> PairPlan:
    """`processes` pairs for a small problem on a CPU; one pair (and the fixed between-process term) for a
    large one, whose extra processes would cost their memory and starts, and on a GPU, where several pairs
    have never run."""
    chosen = max(1, int(processes))
    if chosen == 1:
        return PairPlan(1)
    if device != "cpu":
        return PairPlan(1, f"{chosen} pairs asked: one on {device} (several are timed on a CPU only)")
    footprint = sized(problem)
    if footprint is None or footprint.working_set > REPLICATE_BELOW:
        size = "unknown" if footprint is None else f"{footprint.working_set / (1 << 20):.0f} MiB"
        return PairPlan(1, f"{chosen} pairs asked: one for a working set of {size} (several up to 64 MiB)")
    return PairPlan(chosen)


def resolution(ctx: EvalContext) -> float:
    """The target half-width of the interval: --resolution, else this device's default."""
    chosen = ctx.options.resolution
    return float(chosen) if chosen is not None else RESOLUTION.get(ctx.device, RESOLUTION["cuda"])


def time_candidate(
    ctx: EvalContext,
    pair: SessionPair,
    verifier: Verifier,
    cases: list[CaseSpec],
    fresh: Callable[[WorkerSpec], WorkerSession],
) -> TimingOutcome:
    """The A/B timing and the decision. Several pairs of processes for a small problem (the process effect
    measured); with one pair, a small gain is timed again on a fresh pair of processes."""
    options = ctx.options
    plan = process_pairs(ctx)
    if plan.count > 1:
        estimate, raised = time_pairs(ctx, pair, verifier, cases, fresh, plan.count)
        return _decided(ctx, estimate, raised)
    estimate, raised = time_pair(ctx, pair, verifier, cases)
    outcome = _decided(ctx, estimate, raised)
    look = second_look(ctx, outcome)
    if look > 1:
        low, high = estimate.speedup_ci
        _fresh_pair(pair, verifier, cases, fresh)
        again, more = time_pairs(ctx, pair, verifier, cases, fresh, look)
        first = SetAside(speedup=round(estimate.speedup, 4), ci=(round(low, 4), round(high, 4)))
        looked = dataclasses.replace(again.processes or Processes(pairs=look), second_look_of=first)
        again = dataclasses.replace(again, processes=looked)
        return _decided(ctx, again, raised + more)
    if outcome.decision.status is Status.FASTER and needs_confirmation(estimate, options.min_gain):
        _fresh_pair(pair, verifier, cases, fresh)
        second, more = time_pair(ctx, pair, verifier, cases)
        outcome = _decided(ctx, combined(estimate, second, reason_for(estimate, options.min_gain)), raised + more)
    if plan.why_one:  # said beside the assumed process effect, so a user who asked for more pairs sees why not
        said = dataclasses.replace(outcome.estimate, processes=Processes(pairs=1, why_one=plan.why_one))
        outcome = dataclasses.replace(outcome, estimate=said)
    return outcome


def second_look(ctx: EvalContext, outcome: TimingOutcome) -> int:
    """Pairs of processes to time a one-pair reading again on, fresh (0: none): a correct candidate whose point
    is a gain (above 1 + min_gain and above `second_look_above`, the search's best) that one pair could not
    resolve (AMBIGUOUS: the assumed 8% process effect alone spans it), on a problem small enough for several
    pairs. The first reading is set aside, not pooled: it was chosen for its high point, and pooling would keep
    that luck."""
    options, decision = ctx.options, outcome.decision
    if decision.status is not Status.CORRECT or decision.speed is not SpeedClass.AMBIGUOUS:
        return 0
    if outcome.estimate.speedup <= max(1 + options.min_gain, options.second_look_above):
        return 0
    plan = pair_plan(ctx.problem, ctx.device, options.second_look)
    return plan.count if plan.count > 1 else 0


def _fresh_pair(
    pair: SessionPair, verifier: Verifier, cases: list[CaseSpec], fresh: Callable[[WorkerSpec], WorkerSession]
) -> None:
    """A new candidate and baseline process in place of the timed pair's, started together as the first pair
    was; the candidate ready with the checks' history replayed (the baseline's is replayed before its timing)."""
    assert pair.baseline is not None
    pair.renew(fresh(pair.candidate.spec), fresh(pair.baseline.spec))
    pair.candidate.launch()
    pair.baseline.launch()
    pair.candidate.ready()
    pair.candidate.load()
    verifier.replay(pair.candidate, cases)
    with baseline_failure():
        pair.baseline.ready()


def time_pairs(
    ctx: EvalContext,
    pair: SessionPair,
    verifier: Verifier,
    cases: list[CaseSpec],
    fresh: Callable[[WorkerSpec], WorkerSession],
    count: int,
) -> tuple[TimingResult, list[str]]:
    """`count` pairs of processes timed together, their rounds interleaved (ab_timing.measure_speedup). The
    extra processes are launched together once the first pair is ready (after the candidate's checks: a
    candidate that fails them costs no extra start), so the first pair started seconds before the others;
    each is then made ready with the candidate's check history replayed, like the first baseline's. Every
    extra process is closed here, whatever happens, its accounting kept under `pair<N>_*`."""
    baseline = pair.baseline
    assert baseline is not None
    extra: list[tuple[WorkerSession, WorkerSession]] = []
    try:
        with baseline_failure():
            baseline.load()
            verifier.replay(baseline, cases)
        job = timing_job(ctx, verifier, pair.candidate, baseline)  # refused before any extra process starts
        started = time.monotonic()
        for _ in range(count - 1):  # all launched at once: their interpreters' imports overlap (2 cores here)
            candidate, other = fresh(pair.candidate.spec), fresh(baseline.spec)
            extra.append((candidate, other))
            candidate.launch()
            other.launch()
        for candidate, other in extra:  # then made ready one after another, each with the checks' history
            candidate.ready()
            candidate.load()
            verifier.replay(candidate, cases)  # the same process history as the first candidate's
            with baseline_failure():
                other.ready()
                other.load()
                verifier.replay(other, cases)
        more = [timing_job(ctx, verifier, c, b) for c, b in extra]
        start_s = time.monotonic() - started
        estimate, raised = measure_speedup(job, more)
        if estimate.processes is not None:  # what the extra processes cost to start, beside what they measured
            started_in = dataclasses.replace(estimate.processes, start_s=round(start_s, 3))
            estimate = dataclasses.replace(estimate, processes=started_in)
        return estimate, raised
    finally:
        pair.close_baseline()
        for number, (candidate, other) in enumerate(extra, start=2):
            pair.close_extra(other, f"pair{number}_baseline")
            pair.close_extra(candidate, f"pair{number}_candidate")


def time_pair(
    ctx: EvalContext, pair: SessionPair, verifier: Verifier, cases: list[CaseSpec]
) -> tuple[TimingResult, list[str]]:
    """One pair: a ready baseline process against the candidate, with the same check history first. The
    baseline is closed here, whatever happens, and its accounting kept."""
    baseline = pair.baseline
    assert baseline is not None
    try:
        with baseline_failure():
            baseline.load()
            verifier.replay(baseline, cases)
        return measure_speedup(timing_job(ctx, verifier, pair.candidate, baseline))
    finally:
        pair.close_baseline()


def timing_job(ctx: EvalContext, verifier: Verifier, candidate: WorkerSession, baseline: WorkerSession) -> TimingJob:
    """What the A/B timing of one pair of processes needs from this evaluation."""
    problem, options = ctx.problem, ctx.options
    configs = [(tuple(shape), dtype) for dtype in problem.dtypes for shape in problem.shapes]
    missing = [c for c in configs if c not in verifier.report.expected]
    if missing:
        raise EvaluationError(
            Status.REJECTED,
            f"no checked case for shape {list(missing[0][0])} {missing[0][1]}: cannot audit its timed outputs",
        )
    return TimingJob(
        configs=configs,
        maker=verifier.maker,
        candidate=candidate,
        baseline=baseline,
        device=ctx.device,
        threads=options.threads,
        rounds=options.timing_rounds,
        target_block_ms=options.target_block_ms,
        audit_fraction=options.audit_fraction,
        judge=verifier.judge,
        expected=verifier.report.expected,
        min_gain=options.min_gain,
        sequential=options.sequential,
        enforce_work_budget=not options.trusted_source,  # the timer rule still applies: it could flatter us
        draw_on="cuda" if ctx.device_data else "cpu",
        resolution=resolution(ctx),
        budget_s=options.timing_budget,
    )


def _decided(ctx: EvalContext, estimate: TimingResult, raised: list[str]) -> TimingOutcome:
    roof = roofline(ctx, estimate)
    options = ctx.options
    return TimingOutcome(estimate, decide(estimate, raised, options.min_gain, options.sanity_speedup, roof.rows), roof)


def roofline(ctx: EvalContext, estimate: TimingResult) -> Roofline:
    """Work, ceilings and floors per benchmark shape on this device; nothing without ceilings. Advice for the
    decision's floor check, never a reason to fail. A time under the floor is checked against ceilings
    measured again first: stored ones may have been read on a busy machine (an honest copy of level2/66 read
    524 ms against a 2021 ms floor), and a copy of the problem's own size runs from cache where its data does
    (a floor from the DRAM-sized copy alone is one an honest kernel of a cache-sized problem beats)."""
    ceilings = ctx.options.ceilings
    if ceilings is None:
        return Roofline([], None)
    try:
        from kernel_agent.measure.ceilings import measure_bandwidth, measure_ceilings
        from kernel_agent.measure.roofline import roofline_record, shape_rows

        rows = shape_rows(ctx.problem, estimate, ceilings)
        remeasured = None
        if any(row.candidate is not None and row.candidate.faster_than_floor for row in rows):
            fresh = measure_ceilings(ctx.device, threads=ctx.options.threads)
            own = min(row.counts.bytes for row in rows if row.counts.bytes) // 2
            copy = measure_bandwidth(ctx.device, nbytes=max(own, 1 << 16)) if own else 0.0
            ceilings = ceilings.higher(dataclasses.replace(fresh, memory_gbps=max(fresh.memory_gbps, copy)))
            rows = shape_rows(ctx.problem, estimate, ceilings)
            remeasured = {"at": fresh.measured_at, "spread": fresh.spread, "load": fresh.load, "sized_gbps": copy}
    except Exception:  # noqa: BLE001 - a floor that cannot be computed changes nothing
        return Roofline([], None)
    record = roofline_record(rows, ceilings)
    if remeasured is not None:
        record["remeasured_before_flag"] = remeasured
    return Roofline(rows, record)
