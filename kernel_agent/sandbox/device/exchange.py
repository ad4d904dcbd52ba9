"""One evaluation's device conversation (DESIGN.md section 18), in the order the requests go: stage each side's
buffers, and per request: the device must be quiet before the thaw (the last side's work is over), fresh
inputs filled and L2 flushed while frozen, and after the reply, with the worker frozen, the device quiet again
(else the work ran past the reply) before its outputs are opened. The parts that touch the GPU (transport,
probe, flush, NVML) are given, so this order is tested on a CPU with a fake transport and recorded probes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernel_agent.core.verdict import Status
from kernel_agent.sandbox.device.buffers import DeviceInputs
from kernel_agent.sandbox.device.outputs import DeviceFailure, open_outputs
from kernel_agent.sandbox.device.quiet import AfterReply, ProbeBaseline, foreign_load, work_past_reply
from kernel_agent.sandbox.device.telemetry import DeviceState, recorded, throttled
from kernel_agent.sandbox.device.transport import TensorSpec, Transport

NO_READING = DeviceState(None, None, None, None, None, "none")


@dataclass
class DeviceParts:
    """The GPU-touching parts: real ones from `probe.py`, recorded ones in tests."""

    transport: Transport
    probe: Callable[[], float]  # ms for one tiny kernel on the orchestrator's stream
    flush: Callable[[], None]  # the trusted L2 flush and persisting-L2 reset
    compute_pids: Callable[[], list[int]] = list  # NVML, where present
    read_state: Callable[[], DeviceState] = lambda: NO_READING  # clocks, power, temperature (telemetry.read_state)


@dataclass
class DeviceExchange:
    parts: DeviceParts
    sides: dict[str, DeviceInputs] = field(default_factory=dict)
    idle: ProbeBaseline = field(default_factory=ProbeBaseline)
    frozen_probes: list[float] = field(default_factory=list)  # both workers frozen, after the idle bound was known
    last_side: str | None = None
    states: list[DeviceState] = field(default_factory=list)  # read with both workers frozen, before each block

    def stage(self, side: str, key: str, calls: list[list[TensorSpec]]) -> list[list[dict[str, Any]]]:
        inputs = self.sides.setdefault(side, DeviceInputs(self.parts.transport, side))
        return inputs.stage(key, calls)

    def buffers(self, side: str, key: str) -> list[list[Any]]:
        """A side's input buffers for a staged layout, per call (what the kernel was given, as it left them)."""
        return self.sides[side].staged[key].tensors

    def idle_probe(self) -> None:
        """Both workers frozen and nothing queued (the baseline's pings): the probe's idle latency, or once that
        is known, a reading for the foreign-load rule."""
        reading = self.parts.probe()
        self.states.append(self.parts.read_state())
        if self.idle.bound_ms() is None:
            self.idle.add(reading)
        else:
            self.frozen_probes.append(reading)

    def before_request(self, side: str, key: str, sets: list[list[Any]], frozen: bool) -> None:
        """The last side's work must be over before this side is thawed (and before any baseline time is taken);
        then this request's inputs, and the flush."""
        seen = AfterReply(self.parts.probe())
        late = work_past_reply(seen, self.idle)
        if late is not None and self.last_side is not None:
            raise DeviceFailure(Status.REJECTED, f"{self.last_side}: {late}, before the next call")
        self.sides[side].fill(key, sets, frozen)
        self.parts.flush()

    def after_reply(self, side: str, key: str, frozen: bool) -> list[list[Any]]:
        """The reply came and the worker is frozen: its work must be over. Returns the inputs as placed."""
        if not frozen:
            raise RuntimeError("the device is judged only with the worker frozen")  # a harness bug
        self.last_side = side
        placed = self.sides[side].called(key)
        late = work_past_reply(AfterReply(self.parts.probe()), self.idle)
        if late is not None:
            raise DeviceFailure(Status.REJECTED, late)
        return placed

    def open(self, described: object, expected: list[tuple[tuple[int, ...], str]], frozen: bool) -> list[Any]:
        return open_outputs(self.parts.transport, described, expected, frozen)

    def close(self) -> None:
        """The evaluation is over: unmap what was opened and let the trusted buffers go."""
        self.sides.clear()
        self.parts.transport.close()

    def flags(self) -> list[str]:
        """The timing's device flags: throttling seen across the blocks (with the readings' range)."""
        reason = throttled(self.states)
        return [f"{reason}; {recorded(self.states)}"] if reason else []

    def busy(self, ours: set[int]) -> str | None:
        """Why the device was loaded by another process during the timing, or None (then `correct`, no speedup)."""
        return foreign_load(self.parts.compute_pids(), ours, self.frozen_probes, self.idle)
