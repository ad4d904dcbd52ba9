"""The rounds of an A/B timing: requests shaped to the kernel's length, warm-up, fresh inputs for every call, and
one pair of processes timed a round at a time, a secret sample of the candidate's calls audited as they run."""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import torch

from kernel_agent.core.verdict import Status
from kernel_agent.problem.footprint import POOL_BYTES  # beyond it, each timed call draws its own inputs
from kernel_agent.problem.oracle import fresh_seed
from kernel_agent.sandbox.host.session import Timed, WorkerFailure, WorkerSession
from kernel_agent.sandbox.host.shm import aligned_bytes
from kernel_agent.sandbox.protocol import Warmup
from kernel_agent.timing.job import Config, Samples, TimingFailure, TimingJob, failures_of
from kernel_agent.timing.processes import PairRecords
from kernel_agent.timing.rules import CLAIM_SLACK_MS, claims, times_of_record
from kernel_agent.timing.stats import calls_per_block

REQUEST_MS = 2.0  # a request's kernel time should reach this (several calls per request for shorter kernels)...
MAX_CALLS_PER_REQUEST = 64  # ...up to this many calls
MAX_AUDITS_PER_BLOCK = 10
PINGS_PER_BLOCK = 2  # the baseline's pings before each block of each config: the floor under the records
# Warm-up per side and config: this many calls and this long at the least. The checks have already run the
# kernel on every check case (and the baseline replayed them), so compilation is done; three calls warm the
# caches for the benchmark shape. Ten calls cost a 12 ms kernel 0.5 s of a 2 s timing phase (cpp_softmax, two
# shapes), and a 1 s KernelBench convolution 10 s per side.
WARMUP_CALLS = 3
WARMUP_SECONDS = 0.03

Fetched = list[tuple[list[torch.Tensor], list[torch.Tensor]]]  # audited calls: their inputs and outputs read


@dataclass(frozen=True)
class Shape:
    """How one config's timed calls are grouped: `calls` kernel calls per request, `requests` per block."""

    calls: int
    requests: int

    @property
    def per_block(self) -> int:
        return self.calls * self.requests


def request_shape(per_call_ms: float, target_block_ms: float, max_calls: int = MAX_CALLS_PER_REQUEST) -> Shape:
    """Several calls per request only for kernels much shorter than a request's own overhead
    (about 0.5 ms here): the orchestrator's clock around a request must be dominated by the kernel
    for it to bound the claims (a 0.05 ms kernel under 0.5 ms of jitter-prone overhead could claim
    anything). Never more calls than `max_calls` (what the sized input segment holds)."""
    most = max(1, min(MAX_CALLS_PER_REQUEST, max_calls))
    calls = 1 if per_call_ms <= 0 else max(1, min(most, math.ceil(REQUEST_MS / per_call_ms)))
    return Shape(calls, calls_per_block(per_call_ms * calls, target_block_ms))


def _warm_up(job: TimingJob) -> list[Shape]:
    """Compilation and caches out of the numbers; the baseline's speed shapes the blocks."""
    shapes = []
    for shape, dtype in job.configs:
        inputs = job.maker.inputs(shape, dtype, "normal", fresh_seed())
        per_call_ms = 0.0
        for role, side in (("baseline", job.baseline), ("candidate", job.candidate)):
            request = Warmup(WARMUP_CALLS, WARMUP_SECONDS, side.time_left() / 4, side.place(inputs))
            with failures_of(role):
                reply = side.request(request, "warmup")
            if role == "baseline":
                per_call_ms = 1000 * float(reply.get("seconds", 0)) / max(1, int(reply.get("calls", 1)))
        fits = job.candidate.segment_capacity() // max(1, aligned_bytes(inputs))
        shapes.append(request_shape(per_call_ms, job.target_block_ms / len(job.configs), fits))
    return shapes


class InputPlan:
    """Fresh inputs for every timed call, within a memory bound.

    While a round's sets fit in POOL_BYTES, both sides get the same sets (each process sees each
    set once). Beyond it, every call of each side gets a set drawn for it alone. Nothing is ever
    reused or derived from an earlier input: a kernel that kept an earlier output cannot answer."""

    def __init__(self, job: TimingJob, config: Config, shape: Shape, rng: secrets.SystemRandom) -> None:
        self.job, self.config, self.shape, self.rng = job, config, shape, rng
        self.first: list[torch.Tensor] | None = self.draw()
        self.set_bytes = sum(t.numel() * t.element_size() for t in self.first)
        self.shared = self.set_bytes * shape.per_block <= POOL_BYTES

    def draw(self) -> list[torch.Tensor]:
        shape, dtype = self.config
        return self.job.maker.inputs(shape, dtype, "normal", fresh_seed(), self.job.draw_on)

    def round(self) -> list[list[torch.Tensor]] | None:
        """The round's sets for both sides, or None when each call draws its own."""
        if not self.shared:
            return None
        first, self.first = self.first, None
        return [first if (i == 0 and first is not None) else self.draw() for i in range(self.shape.per_block)]

    def audit_picks(self, rounds: int) -> set[tuple[int, int]]:
        """(round, call) pairs of the candidate's to audit: a fraction of every block, chosen now and kept here."""
        per_block = self.shape.per_block
        count = min(MAX_AUDITS_PER_BLOCK, max(1, round(self.job.audit_fraction * per_block)))
        return {(r, i) for r in range(rounds) for i in self.rng.sample(range(per_block), count)}


def _audit_inputs(side: WorkerSession, timed: Timed, call: int, inputs: list[torch.Tensor], number: int) -> None:
    """An audited timed call's inputs, as the kernel left them, bitwise against what was placed (as in a check)."""
    changed = side.unchanged(timed.inputs[call], inputs)
    if changed:
        raise WorkerFailure(Status.INCORRECT, f"audited timed call {number} modified its input {changed[0]}")


def _one_block(
    job: TimingJob, plan: InputPlan, round_index: int, shared_sets: list | None, picks: set, audited: int
) -> tuple[dict[str, list[Timed]], Fetched]:
    """One block of requests for one config, sides alternating which goes first; the audited calls'
    outputs are read from the frozen candidate as they happen."""
    k, blocks, fetched = plan.shape.calls, {"baseline": [], "candidate": []}, []
    sides = {"baseline": job.baseline, "candidate": job.candidate}
    expected = job.expected[plan.config]
    for i in range(plan.shape.requests):
        order = ("baseline", "candidate") if (round_index + i) % 2 == 0 else ("candidate", "baseline")
        shared = shared_sets[i * k : (i + 1) * k] if shared_sets is not None else None
        for role in order:
            sets = shared if shared is not None else [plan.draw() for _ in range(k)]
            audits = [j for j in range(k) if role == "candidate" and (round_index, i * k + j) in picks]
            with failures_of(role):
                timed = sides[role].timed_calls(
                    sets, integrity=i == plan.shape.requests - 1, watched={j: expected for j in audits}
                )
                for j in audits:
                    _audit_inputs(sides[role], timed, j, sets[j], audited + len(fetched) + 1)
                    fetched.append((sets[j], sides[role].read(timed.outputs[j], expected)))
            claimed = sum(claims(timed, job.device))
            if claimed > timed.trusted_ms + CLAIM_SLACK_MS:
                raise TimingFailure(
                    Status.REJECTED,
                    f"{role} claimed {claimed:.2f} ms for calls that took {timed.trusted_ms:.2f} ms (forged timer)",
                )
            blocks[role].append(timed)
    return blocks, fetched


def _check_audits(job: TimingJob, fetched: list[tuple[list, list]], dtype: str, before: int) -> None:
    """Compare audited outputs with the reference, after the block (both sandboxes are frozen), by the same
    judge as the check calls: a timed call is held to exactly what a check call of its size is held to."""
    for number, (inputs, outputs) in enumerate(fetched):
        result = job.judge(inputs, outputs, dtype)
        if not result.passed:
            assert result.mismatch is not None
            raise TimingFailure(
                Status.INCORRECT,
                f"audited timed call {before + number + 1} returned a wrong result: {result.mismatch.line()}",
            )


# ******************** one pair, a round at a time ********************


class PairRun:
    """One baseline process against one candidate process: warmed up and staged at construction, then timed a
    round at a time (`one_round`), so that several pairs can take turns round by round."""

    def __init__(self, job: TimingJob, rng: secrets.SystemRandom) -> None:
        self.job = job
        self.shapes = _warm_up(job)
        self.plans = [InputPlan(job, config, shape, rng) for config, shape in zip(job.configs, self.shapes)]
        for plan in self.plans:  # every layout staged on both sides before the first timed input is placed
            for role, side in (("baseline", job.baseline), ("candidate", job.candidate)):
                with failures_of(role):
                    side.stage([plan.first or plan.draw()] * plan.shape.calls)
        self.picks = [plan.audit_picks(job.rounds) for plan in self.plans]
        self.samples = {
            "baseline": Samples([[] for _ in job.configs], [[] for _ in job.configs]),
            "candidate": Samples([[] for _ in job.configs]),
        }
        self.audited = 0
        self.done = 0

    def one_round(self) -> None:
        """Rounds of requests interleaved one by one: the baseline and the candidate take turns on the
        same input sets, the side that goes first swapping every request. Load, frequency and cache
        effects that drift over a block (the side timed second in a block of blocks ran about 5% faster
        here) then fall on both sides alike."""
        job, samples, round_index = self.job, self.samples, self.done
        round_sets = [plan.round() for plan in self.plans]
        for c, plan in enumerate(self.plans):
            with failures_of("baseline"):  # the floor under every record: what the least request costs
                samples["baseline"].pings[c] += [job.baseline.ping() for _ in range(PINGS_PER_BLOCK)]
            blocks, fetched = _one_block(job, plan, round_index, round_sets[c], self.picks[c], self.audited)
            for role, block in blocks.items():
                samples[role].calls[c].append(block)
            _check_audits(job, fetched, job.configs[c][1], self.audited)
            self.audited += len(fetched)
        self.done += 1

    def records(self) -> PairRecords:
        per_side, _ = times_of_record(self.job, self.samples)
        return PairRecords(per_side["baseline"], per_side["candidate"])

    @property
    def inputs(self) -> list[str]:
        return [
            "drawn per round, the same for both sides" if plan.shared else "drawn per call, for each side"
            for plan in self.plans
        ]
