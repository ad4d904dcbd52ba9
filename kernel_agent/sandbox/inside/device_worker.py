"""The worker's half of the device path (DESIGN.md section 18): open the trusted side's input buffers once per
staged layout, and describe each call's outputs and inputs as handles instead of host copies. Runs in the
sandboxed process; everything it returns is a claim the orchestrator holds to the expected outputs."""

from __future__ import annotations

from typing import Any

from kernel_agent.core.verdict import Status
from kernel_agent.sandbox.device.transport import Handle, Transport
from kernel_agent.sandbox.protocol import CallError


class WrongDevice(CallError):
    """An output not on the problem's device: the candidate's `incorrect` (the worker replies with it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(Status.INCORRECT, reason)


def open_inputs(transport: Transport, calls: list[list[dict[str, Any]]]) -> list[list[Any]]:
    """Views of the trusted buffers for each call of a staged request (opened once, kept for every request)."""
    return [[transport.open(Handle.parse(h)) for h in call] for call in calls]


def export_all(transport: Transport, tensors: list[Any] | tuple[Any, ...], device: str) -> list[dict[str, Any]]:
    """Handles for tensors the orchestrator opens itself (outputs, and inputs as the kernel left them)."""
    for i, tensor in enumerate(tensors):
        if tensor.device.type != device:
            raise WrongDevice(f"output {i} is on {tensor.device.type}, expected {device}")
    return [transport.export(t).to_json() for t in tensors]
