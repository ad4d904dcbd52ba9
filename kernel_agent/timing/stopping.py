"""When an A/B timing stops: after a fixed number of rounds, or once a look settles it (one pair: the sequential
looks of timing/sequential.py; several pairs: a 99.9% look, the speed class, the target resolution, the time
budget); and the stopping record the verdict keeps."""

from __future__ import annotations

from dataclasses import dataclass

from kernel_agent.core.timing_result import Stopping
from kernel_agent.timing import processes
from kernel_agent.timing.job import TimingJob
from kernel_agent.timing.processes import PairRecords
from kernel_agent.timing.sequential import Look, Settled, look
from kernel_agent.timing.speed_class import SpeedClass, classify
from kernel_agent.timing.stats import point_speedup

MIN_PAIR_ROUNDS = 2  # several pairs: rounds of each before the first look (the audit then samples 2 x pairs blocks)


@dataclass(frozen=True)
class Ending:
    """What ended the timing: `settled` (an early look decided it), `same` (the interval fell inside
    +-resolution), `resolution` (the interval became narrower than the target), `budget` (the time per verdict
    was spent) or `rounds` (every pair timed its most rounds); and the early look's own record, if any."""

    by: str
    look: Look | None


def stopping_record(job: TimingJob, ended: Ending, pairs: int) -> Stopping:
    if not job.sequential or (pairs == 1 and job.rounds <= job.min_rounds):
        return Stopping(rule="fixed rounds", ended_by=ended.by)
    return Stopping(
        rule="sequential",
        settled_early=ended.look is not None,
        min_rounds=job.min_rounds if pairs == 1 else MIN_PAIR_ROUNDS,
        ended_by=ended.by,
        look=ended.look.record() if ended.look is not None else None,
    )


# ******************** the stopping rule ********************


def stop_after(job: TimingJob, pairs: list[PairRecords], cycles: int, elapsed: float) -> Ending | None:
    """What ends the timing after cycle `cycles` (every pair timed that many rounds); None to go on. The last
    cycle is decided by the full 95% interval as with fixed rounds.

    One pair: the early looks of timing/sequential.py. Several: a 99.9% look settles
    FAST or SLOW (the union bound of sequential.py holds for FAST); the 95% interval ends it as SAME, or when
    it is narrower than the target (half of it each side: `resolution` / 2); else the time budget does."""
    if not job.sequential or cycles >= job.rounds:
        return None
    if len(pairs) == 1:
        if cycles < job.min_rounds:
            return None
        base, cand = pairs[0].baseline, pairs[0].candidate
        early = look(point_speedup(base, cand), base, cand, job.min_gain)
        return Ending("settled", early) if early.settled else None
    if cycles < MIN_PAIR_ROUNDS:
        return None
    strict = processes.estimate(pairs, "99.9%")
    low, high = strict.ci
    if low > 1 + job.min_gain or high < 1 - job.min_gain:
        settled = Settled.FASTER if low > 1 + job.min_gain else Settled.NOT_FASTER
        early = Look(sum(p.rounds for p in pairs), strict.speedup, strict.ci, strict.ci, settled)
        return Ending("settled", early)
    final = processes.estimate(pairs)
    if classify(final.ci, job.min_gain, job.resolution) is SpeedClass.SAME:
        return Ending("same", None)
    if final.half_width <= job.resolution / 2:
        return Ending("resolution", None)
    if elapsed >= job.budget_s:
        return Ending("budget", None)
    return None
