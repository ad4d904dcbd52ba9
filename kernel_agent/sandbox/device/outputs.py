"""Opening a worker's outputs through IPC (DESIGN.md section 18, step 3): every handle is held to the expected
count, shape, dtype and byte bound before it is opened, and to the driver's size of what it maps after, so a
forged handle can cost the orchestrator neither a large read nor a fault in its own CUDA context."""

from __future__ import annotations

from typing import Any

from kernel_agent.core.verdict import Status, StatusError
from kernel_agent.sandbox.device.transport import Handle, HandleError, Transport

MAX_OUTPUTS = 256


class DeviceFailure(StatusError):
    """What the worker's device reply earns: the candidate's verdict, never the orchestrator's exception."""


def parse_handles(described: object) -> list[Handle]:
    if not isinstance(described, list) or len(described) > MAX_OUTPUTS:
        why = f"protocol violation: device outputs are not a list of at most {MAX_OUTPUTS}"
        raise DeviceFailure(Status.REJECTED, why)
    try:
        return [Handle.parse(d) for d in described]
    except HandleError as exc:
        raise DeviceFailure(Status.REJECTED, f"protocol violation: {exc}") from None


def held_to(handles: list[Handle], expected: list[tuple[tuple[int, ...], str]]) -> str | None:
    """Why the handles cannot be the expected outputs ((shape, dtype) each), or None; worded as `shm.mismatch`."""
    if len(handles) != len(expected):
        return f"returned {len(handles)} output(s), expected {len(expected)}"
    for i, (handle, (shape, dtype)) in enumerate(zip(handles, expected)):
        if handle.shape != tuple(shape):
            return f"output {i}: shape {list(handle.shape)}, expected {list(shape)}"
        if handle.dtype != dtype:
            return f"output {i}: dtype torch.{handle.dtype}, expected torch.{dtype}"
    return None


def bound_bytes(expected_bytes: int) -> int:
    """The most one call's outputs may span (as `shm.read_bound`: a generous multiple of what is expected)."""
    return 4 * expected_bytes + (1 << 20)


def open_outputs(
    transport: Transport, described: object, expected: list[tuple[tuple[int, ...], str]], frozen: bool
) -> list[Any]:
    """The worker's outputs, opened on the trusted side's device while the worker is frozen."""
    if not frozen:
        raise RuntimeError("device outputs opened while the worker runs")  # a harness bug, not a verdict
    handles = parse_handles(described)
    wrong = held_to(handles, expected)
    if wrong:
        raise DeviceFailure(Status.INCORRECT, wrong)
    limit = bound_bytes(sum(h.spec.nbytes for h in handles))
    if sum(h.storage_bytes for h in handles) > limit or any(h.span_bytes() > h.storage_bytes for h in handles):
        raise DeviceFailure(Status.REJECTED, "a device output's view reaches past its storage or the read bound")
    opened = []
    for i, handle in enumerate(handles):
        try:
            tensor = transport.open(handle)
        except Exception as exc:  # noqa: BLE001 - a handle no check foresaw: refused, never raised on
            raise DeviceFailure(Status.INCORRECT, f"output {i} unopenable: {type(exc).__name__}: {exc}"[:300]) from None
        mapped = transport.mapped_bytes(tensor)
        if mapped is not None and handle.reach_bytes() > mapped:
            raise DeviceFailure(Status.REJECTED, f"output {i}'s handle claims more bytes than its allocation maps")
        opened.append(tensor)
    return opened
