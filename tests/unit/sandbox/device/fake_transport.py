"""A fake IPC transport for the device path's handshake tests. Fake because this machine has no GPU: CUDA IPC
needs two CUDA contexts on one device. It hands CPU tensors across by a token inside one process, sharing
storage as an IPC mapping does (a write on either side is seen on the other), so the order of the handshake,
the checks on handles and the rules on readings are the real code; only the sharing itself is stood in for."""

from __future__ import annotations

from itertools import count
from typing import Any

import torch

from kernel_agent.sandbox.device.transport import Handle, TensorSpec


class FakeTransport:
    def __init__(self) -> None:
        self.shared: dict[str, torch.Tensor] = {}
        self.tokens = count(1)
        self.syncs = 0

    def allocate(self, spec: TensorSpec) -> Any:
        return torch.full(spec.shape, float("nan"), dtype=getattr(torch, spec.dtype))

    def export(self, tensor: Any) -> Handle:
        token = f"{next(self.tokens):064x}"
        self.shared[token] = tensor
        storage = tensor.untyped_storage()
        return Handle(
            token,
            0,
            storage.nbytes(),
            str(tensor.dtype).removeprefix("torch."),
            tuple(tensor.shape),
            tuple(tensor.stride()),
            tensor.storage_offset(),
        )

    def open(self, handle: Handle) -> Any:
        base = self.shared[handle.ipc]  # KeyError for a handle nobody exported: "unopenable"
        view = torch.empty((0,), dtype=getattr(torch, handle.dtype))
        return view.set_(base.untyped_storage(), handle.offset, handle.shape, handle.strides)

    def mapped_bytes(self, tensor: Any) -> int | None:
        return tensor.untyped_storage().nbytes() - tensor.storage_offset() * tensor.element_size()

    def synchronize(self) -> None:
        self.syncs += 1

    def close(self) -> None:
        self.shared.clear()
