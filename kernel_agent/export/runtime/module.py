"""A KernelBench winner as one nn.Module: the reference `Model` and the optimized `ModelNew` on the same weights."""

from __future__ import annotations

from typing import Any

import torch

from .dispatch import OPTIMIZED, Registry


class DispatchModule(torch.nn.Module):
    """A KernelBench winner: the reference `Model` and the optimized `ModelNew` holding the same weights.

    Each call runs `optimized` for a (device, dtype) it was verified on (in eval mode, like the
    verification) and `reference` elsewhere. The weights live in `reference`; `load_state_dict`
    takes a reference state dict and copies it into `optimized`; call `sync_weights()` after
    changing the reference's parameters any other way. Both copies are kept, so parameters use
    twice the memory.
    """

    def __init__(self, registry: Registry, kernel: str, reference: torch.nn.Module, optimized: torch.nn.Module) -> None:
        super().__init__()
        self.registry = registry
        self.kernel = kernel
        self.reference = reference
        self.optimized = optimized
        self.sync_weights()

    @classmethod
    def create(cls, registry: Registry, kernel: str, init_inputs: tuple) -> DispatchModule:
        """Both models built from `init_inputs` (default: the problem's get_init_inputs()), in eval mode."""
        reference = registry.load(kernel, "reference")
        optimized = registry.load(kernel, OPTIMIZED)
        args = list(init_inputs) if init_inputs else list(reference.get_init_inputs())
        return cls(registry, kernel, reference.Model(*args).eval(), optimized.ModelNew(*args).eval())

    def sync_weights(self) -> None:
        self.optimized.load_state_dict(self.reference.state_dict(), strict=True)

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self.reference.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Any, strict: bool = True, **kwargs: Any) -> Any:
        result = self.reference.load_state_dict(state_dict, strict=strict, **kwargs)
        self.sync_weights()
        return result

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        path = self.registry.choose(self.kernel, inputs, kwargs)
        return (self.optimized if path == OPTIMIZED else self.reference)(*inputs, **kwargs)
