"""PyTorch rewrites: torch operations only, nothing to build."""

from __future__ import annotations

from kernel_agent.evaluate.backends.base import Backend


class TorchBackend(Backend):
    name = "torch"
    label = "PyTorch"
    prompt_rules = (
        "PyTorch backend: use torch operations only; fuse work, avoid temporaries and extra passes over memory.",
    )

    def detects(self, source: str) -> bool:
        return True  # the fallback: registered last
