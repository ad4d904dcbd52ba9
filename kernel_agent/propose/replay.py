"""The `replay` provider: rerun a recorded run's LLM replies without any network.

Why: a run must be reproducible (and debuggable) after the fact, offline and
for free; replaying the recorded `llm_calls` in order feeds the same candidates
through today's verifier.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from kernel_agent.propose.base import LLMCall, ProposalBatch, ProposalContext
from kernel_agent.propose.openai_chat import ProviderConfigError, to_proposals


class ReplayProvider:
    """Returns one recorded call per `propose`, oldest first; `exhausted` once none remain."""

    name = "replay"
    reads_profile = False  # recorded replies do not depend on the prompt

    def __init__(self, calls: list[LLMCall]) -> None:
        self.calls = list(calls)
        self.position = 0

    @classmethod
    def from_json(cls, path: Path) -> ReplayProvider:
        """Load calls saved as a JSON list of LLMCall objects (as `dataclasses.asdict` writes them)."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ProviderConfigError(f"{path}: cannot read recorded calls ({exc})") from None
        if not isinstance(data, list):
            raise ProviderConfigError(f"{path}: recorded calls must be a JSON list of objects")
        return cls([_call_from_dict(item, path) for item in data])

    @property
    def remaining(self) -> int:
        return len(self.calls) - self.position

    def propose(self, context: ProposalContext) -> ProposalBatch:
        if self.position >= len(self.calls):
            return ProposalBatch(exhausted=True)
        call = replace(self.calls[self.position], cached=True)
        self.position += 1
        proposals = to_proposals(call.response_texts, context.problem.entry_point, self.name, 0)
        return ProposalBatch(proposals=proposals, calls=[call])


def _call_from_dict(item: Any, path: Path) -> LLMCall:
    known = {f.name for f in fields(LLMCall)}
    if not isinstance(item, dict) or not {"prompt_hash", "model", "base_url", "request", "response_texts"} <= set(item):
        raise ProviderConfigError(
            f"{path}: each recorded call needs prompt_hash, model, base_url, request and response_texts"
        )
    return LLMCall(**{k: v for k, v in item.items() if k in known})
