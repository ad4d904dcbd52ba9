"""The trusted side's input buffers for one worker (DESIGN.md section 18, steps 1 and 2): allocated and exported
once per staged layout, filled with each request's fresh inputs only while the worker is frozen. One instance
per side: an IPC mapping is writable, so the candidate never holds a handle to the baseline's inputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kernel_agent.sandbox.device.transport import Handle, TensorSpec, Transport


class Phase(Enum):
    """Where one staged layout's buffers are in the request cycle."""

    STAGED = "staged"  # allocated and exported; nothing placed yet
    FILLED = "filled"  # this request's inputs are in place; the worker may be thawed
    CALLED = "called"  # the request ran; the next fill must come before the next call


class OrderError(RuntimeError):
    """The orchestrator broke its own protocol (a harness bug, never a candidate's verdict)."""


@dataclass
class Staged:
    tensors: list[list[Any]]  # per call, per input
    handles: list[list[Handle]]
    phase: Phase = Phase.STAGED
    fills: int = 0
    placed: list[list[Any]] = field(default_factory=list)  # this request's inputs as drawn (kept by the trusted side)


@dataclass
class DeviceInputs:
    transport: Transport
    side: str
    staged: dict[str, Staged] = field(default_factory=dict)

    def stage(self, key: str, calls: list[list[TensorSpec]]) -> list[list[dict[str, Any]]]:
        """Allocate one request's buffers (once per layout) and the handles the worker opens once, as JSON."""
        if key not in self.staged:
            tensors = [[self.transport.allocate(spec) for spec in call] for call in calls]
            handles = [[self.transport.export(t) for t in call] for call in tensors]
            self.staged[key] = Staged(tensors, handles)
        self.staged[key].phase = Phase.STAGED  # a new worker of this side (a confirmation) starts the cycle afresh
        return [[h.to_json() for h in call] for call in self.staged[key].handles]

    def fill(self, key: str, sets: list[list[Any]], frozen: bool) -> None:
        """Copy this request's fresh inputs (drawn on the device) into the buffers, then wait for the copies:
        only while the worker is frozen, and never twice without a call between (a fill is for one call)."""
        staged = self._get(key)
        if not frozen:
            raise OrderError(f"{self.side}: inputs placed while the worker runs")
        if staged.phase is Phase.FILLED:
            raise OrderError(f"{self.side}: a request's inputs placed twice without a call between")
        if [len(s) for s in sets] != [len(c) for c in staged.tensors]:
            raise OrderError(f"{self.side}: the inputs do not match the staged layout")
        for buffers, inputs in zip(staged.tensors, sets):
            for buffer, value in zip(buffers, inputs):
                buffer.copy_(value)
        self.transport.synchronize()
        staged.phase, staged.fills, staged.placed = Phase.FILLED, staged.fills + 1, sets

    def called(self, key: str) -> list[list[Any]]:
        """The request ran on the placed inputs; those inputs as drawn, which the kernel could not reach (the
        audit's bitwise check compares the buffers as the kernel left them with these)."""
        staged = self._get(key)
        if staged.phase is not Phase.FILLED:
            raise OrderError(f"{self.side}: a call on inputs that were not placed for it")
        staged.phase = Phase.CALLED
        return staged.placed

    def _get(self, key: str) -> Staged:
        if key not in self.staged:
            raise OrderError(f"{self.side}: layout {key} was never staged")
        return self.staged[key]
