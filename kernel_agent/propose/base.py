"""The provider interface: anything that proposes candidate kernels.

A provider is one object with one method, `propose(context) -> ProposalBatch`.
The built-in ones are `search` (offline tunables search, the default),
`openai` (any OpenAI-compatible chat endpoint) and `replay` (recorded replies).
Third-party providers register through the `kernel_agent.providers` entry-point
group and plug in the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernel_agent.core.llm_call import LLMCall
from kernel_agent.problem.load import Problem


@dataclass
class Attempt:
    """One earlier evaluated candidate, as fed back to providers."""

    candidate_id: int | None
    source: str
    status: str  # a verdict status, or "unparseable" / "duplicate"
    reason: str
    speedup: float | None
    note: str = ""  # e.g. "BLOCK_SIZE=128 NUM_WARPS=4", or the LLM's own summary
    round: int = 0


@dataclass
class Proposal:
    """One candidate module proposed by a provider, or a reply that held none."""

    source: str | None  # the full candidate module; None when the reply could not be parsed
    origin: str  # provider name
    note: str = ""
    parse_error: str | None = None  # why no candidate could be extracted
    llm_call_index: int | None = None  # index into ProposalBatch.calls


@dataclass
class ProposalBatch:
    proposals: list[Proposal] = field(default_factory=list)
    calls: list[LLMCall] = field(default_factory=list)
    exhausted: bool = False  # the provider has nothing new to offer (search space done, replay finished)


@dataclass
class ProposalContext:
    """What a provider sees: the problem, the current parents and everything tried so far."""

    problem: Problem
    baseline_source: str
    parents: list[Attempt]  # best accepted variants so far (empty: the baseline is the parent)
    history: list[Attempt]  # every earlier attempt for this kernel, oldest first
    profile: dict[str, Any]  # baseline timing and work counts (see kernel_agent.measure.profile.build_profile)
    round: int
    samples: int  # how many candidates to propose this round
    device: str
    cache_lookup: Callable[[str], LLMCall | None] = lambda key: None  # response cache by prompt hash
    best_profile: dict[str, Any] | None = None  # the same profile for parents[0], the current best (role "candidate")
    on_tokens: Callable[[int], None] | None = None  # tokens received so far of the reply streaming in (progress)


class Provider(Protocol):
    """One method. A provider may also set `reads_profile = False` (absent means True) when it never
    reads ProposalContext.profile/best_profile: the loop then skips the in-sandbox operator profiling."""

    name: str

    def propose(self, context: ProposalContext) -> ProposalBatch: ...
