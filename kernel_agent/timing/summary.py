"""The summary of an A/B timing: the speedup and its interval over one pair of processes (the round bootstrap
widened by the assumed process effect) or several (the t interval over pairs, the process effect measured), held
to the rules against each pair's own baseline, as the typed `TimingResult`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernel_agent.core.timing_result import (
    Accounts,
    ContentionShare,
    HugePages,
    MedianCpu,
    Processes,
    Resolution,
    SandboxAccount,
    ShapeTiming,
    SideRatios,
    Summary,
    TimingResult,
    geometric_mean,
)
from kernel_agent.core.verdict import Status
from kernel_agent.measure.contention import Contention
from kernel_agent.sandbox.host.session import Timed, WorkerSession
from kernel_agent.timing import processes
from kernel_agent.timing.cpu_use import after_reply_cap, cpu_use, worst_shape
from kernel_agent.timing.job import TimingFailure, TimingJob
from kernel_agent.timing.processes import mde
from kernel_agent.timing.rounds import PairRun
from kernel_agent.timing.rules import cross_check, timer_mismatch, times_of_record, work_rules
from kernel_agent.timing.sequential import LOOK_LEVEL
from kernel_agent.timing.stats import PROCESS_EFFECT, percentile, speedup_interval
from kernel_agent.timing.stopping import Ending, stopping_record


@dataclass(frozen=True)
class Interval:
    """The speedup, its interval and the numbers each kind of timing (one pair, several) gives the record."""

    speedup: float
    ci: tuple[float, float]
    level: str
    statistical_ci: tuple[float, float]
    process_effect: float
    baseline: Summary
    candidate: Summary
    per_shape: list[dict[str, float]]
    se: float  # of the log speedup: the MDE's scale
    df: int
    processes: Processes | None = None

    @property
    def half_width(self) -> float:
        low, high = self.ci
        return math.expm1(math.log(high / low) / 2) if low > 0 and math.isfinite(high) else math.inf


def _one_pair(run: PairRun, ended: Ending) -> Interval:
    """One pair: the round bootstrap widened by the fixed between-process term (large problems, or `processes`
    set to 1); an early stop is decided, and reported, by the stricter interval of its look."""
    pair = run.records()
    estimate = speedup_interval(pair.baseline, pair.candidate)
    stop = ended.look
    ci = tuple(stop.ci) if stop is not None else (estimate.ci_low, estimate.ci_high)
    # the normal-theory scale of the widened 95% interval (not of a look's 99.9%): what the MDE reads
    se = math.log(estimate.ci_high / estimate.ci_low) / (2 * 1.96) if estimate.ci_low > 0 else math.inf
    return Interval(
        speedup=estimate.speedup,
        ci=ci,  # type: ignore[arg-type]
        level=f"{LOOK_LEVEL:.1%} sequential" if stop is not None else "95%",
        statistical_ci=tuple(stop.statistical_ci if stop is not None else estimate.statistical_ci),  # type: ignore[arg-type]
        process_effect=PROCESS_EFFECT,
        baseline=estimate.baseline,
        candidate=estimate.candidate,
        per_shape=estimate.per_shape,
        se=se,
        df=120,
    )


def _over_pairs(runs: list[PairRun], ended: Ending) -> Interval:
    """Several pairs: the t interval over pairs (timing/processes.py), the process effect measured."""
    pairs = [run.records() for run in runs]
    est = processes.estimate(pairs)
    stop = ended.look
    ci = tuple(stop.ci) if stop is not None else est.ci
    t = processes.t_quantile(len(pairs) - 1, processes.LEVELS["95%"])  # per shape: over pairs
    every = [s for p in pairs for shape in p.baseline for r in shape for s in r]
    every_cand = [s for p in pairs for shape in p.candidate for r in shape for s in r]
    per_shape = []
    for s in range(len(pairs[0].baseline)):
        base = [np.median(np.concatenate(p.baseline[s])) for p in pairs]
        cand = [np.median(np.concatenate(p.candidate[s])) for p in pairs]
        logs = np.log(np.asarray(base) / np.asarray(cand))
        half = t * float(np.std(logs, ddof=1)) / math.sqrt(len(logs))
        per_shape.append(
            {
                "speedup": float(np.exp(logs.mean())),
                "baseline_median_ms": geometric_mean(base),
                "candidate_median_ms": geometric_mean(cand),
                "speedup_ci": [float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))],
                "baseline_p20_ms": percentile([r for p in pairs for r in p.baseline[s]], 20),
                "candidate_p80_ms": percentile([r for p in pairs for r in p.candidate[s]], 80),
            }
        )
    return Interval(
        speedup=est.speedup,
        ci=ci,  # type: ignore[arg-type]
        level=f"{LOOK_LEVEL:.1%} sequential over {len(pairs)} process pairs"
        if stop is not None
        else f"95% over {len(pairs)} process pairs",
        statistical_ci=est.rounds_only(),
        process_effect=est.process_effect,
        baseline=Summary.of(every),
        candidate=Summary.of(every_cand),
        per_shape=per_shape,
        se=est.se,
        df=est.df,
        processes=est.record(tuple(_memory_of(run.job) for run in runs)),
    )


def huge_pages_kb(side: WorkerSession) -> int | None:
    """The worker process's AnonHugePages, from /proc (None where it cannot be read)."""
    control = getattr(side, "control", None)
    pid = getattr(control, "worker_pid", None)
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text() if pid else ""
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return None


def _memory_of(job: TimingJob) -> HugePages:
    """Each side's anonymous memory backed by huge pages (kB): a candidate cause of a process effect."""
    return HugePages(baseline=huge_pages_kb(job.baseline), candidate=huge_pages_kb(job.candidate))


def cpu_per_wall(runs: list[PairRun]) -> SideRatios:
    """Each side's sandbox CPU over its timed requests' wall time, over every pair: a candidate that buys its
    time with CPU beyond the baseline's (a hidden core) shows here (decision.py's guard on FAST)."""
    ratios = {}
    for role in ("baseline", "candidate"):
        timed = [t for run in runs for c in range(len(run.job.configs)) for t in run.samples[role].flat(c)]
        wall = sum(t.wall_ns for t in timed)
        ratios[role] = sum(t.cpu_ns for t in timed) / wall if wall > 0 else 0.0
    return SideRatios(**ratios)


def cpu_at_median(job: TimingJob, runs: list[PairRun]) -> MedianCpu | None:
    """Each side's CPU per wall second over the requests that make each shape's median, pooled over the pairs, on
    the shape where the candidate's stands highest against its allowance (`cpu_use`)."""

    def requests(role: str, c: int) -> list[Timed]:
        return [t for run in runs for t in run.samples[role].flat(c)]

    caps = [after_reply_cap(requests("baseline", c)) for c in range(len(job.configs))]
    uses = {
        role: [cpu_use(requests(role, c), caps[c]) for c in range(len(job.configs))]
        for role in ("baseline", "candidate")
    }
    c = worst_shape(uses["candidate"], uses["baseline"], job.threads)
    if c is None:
        return None
    shape, dtype = job.configs[c]
    return MedianCpu(
        shape=tuple(shape),
        dtype=dtype,
        baseline=uses["baseline"][c].per_wall,
        candidate=uses["candidate"][c].per_wall,
    )


# ******************** the summary ********************


def summarize(
    job: TimingJob, runs: list[PairRun], ended: Ending, busy: Contention | None = None
) -> tuple[TimingResult, list[str]]:
    over_budget = None
    flags: list[str] = []
    for run in runs:  # every candidate process is held to the rules against its own baseline
        over_budget = over_budget or work_rules(run.job, run.samples)
        for c in range(len(job.configs)):
            reason = timer_mismatch(run.samples["candidate"].flat(c), run.samples["baseline"].flat(c), job.device)
            if reason:
                raise TimingFailure(Status.REJECTED, reason)
        if job.device == "cuda":
            flags += cross_check(run.samples, len(job.configs))
    if job.device == "cuda":
        exchange = getattr(job.candidate, "exchange", None)  # the device path's: throttling is a flag
        flags += exchange.flags() if exchange is not None else []
    interval = _one_pair(runs[0], ended) if len(runs) == 1 else _over_pairs(runs, ended)
    first = runs[0]
    per_shape = interval.per_shape
    result = TimingResult(
        speedup=interval.speedup,
        speedup_ci=interval.ci,
        ci_level=interval.level,
        statistical_ci=interval.statistical_ci,
        process_effect=interval.process_effect,
        baseline=interval.baseline,
        candidate=interval.candidate,
        rounds=sum(run.done for run in runs),
        max_rounds=job.rounds * len(runs),
        stopping=stopping_record(job, ended, len(runs)),
        calls_per_block=[shape.per_block for shape in first.shapes],
        calls_per_request=[shape.calls for shape in first.shapes],
        per_shape=[
            ShapeTiming(
                shape=tuple(shape),
                dtype=dtype,
                speedup=ps["speedup"],
                speedup_ci=tuple(ps["speedup_ci"]),
                baseline_median_ms=ps["baseline_median_ms"],
                candidate_median_ms=ps["candidate_median_ms"],
                baseline_p20_ms=ps["baseline_p20_ms"],
                candidate_p80_ms=ps["candidate_p80_ms"],
            )
            for (shape, dtype), ps in zip(job.configs, per_shape)
        ],
        audited_calls=sum(run.audited for run in runs),
        record_floor_ms=times_of_record(job, first.samples)[1],
        timed_inputs=first.inputs,
        clock=("cuda events" if job.device == "cuda" else "worker perf_counter_ns")
        + ", bounded below by the orchestrator's clock per request less the floor of the baseline's pings",
        threads=job.threads,
        work_budget_exceeded=over_budget,
        contention=ContentionShare.from_json(busy.to_json()) if busy is not None else None,
        accounting=Accounts(
            baseline=SandboxAccount.from_json(job.baseline.accounting.to_json()),
            candidate=SandboxAccount.from_json(job.candidate.accounting.to_json()),
        ),
        resolution=Resolution(
            target=job.resolution,
            half_width=interval.half_width,
            mde=mde(interval.se, interval.df, job.min_gain),
            ended_by=ended.by,
            budget_s=job.budget_s,
        ),
        processes=interval.processes,
        cpu_per_wall=cpu_per_wall(runs),
        cpu_at_median=cpu_at_median(job, runs),
    )
    return result, flags
