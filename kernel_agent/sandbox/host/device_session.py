"""A worker session on the device path (`--gpu-data device`, DESIGN.md section 18): the same conversation as
`WorkerSession`, but a timed request's inputs are the trusted side's device buffers (filled while frozen, the
device seen quiet first), its outputs come back as IPC handles opened by the orchestrator, and the device must
be quiet after the reply. Both sides of one evaluation share one `DeviceExchange`. Never run on a GPU yet."""

from __future__ import annotations

import json
import time
from typing import Any

import torch

from kernel_agent.core.verdict import StatusError
from kernel_agent.sandbox.device.exchange import DeviceExchange
from kernel_agent.sandbox.device.outputs import parse_handles
from kernel_agent.sandbox.device.transport import Handle, TensorSpec
from kernel_agent.sandbox.host.process import WorkerFailure
from kernel_agent.sandbox.host.session import Timed, WorkerSession, call_layouts, described_reply
from kernel_agent.sandbox.host.shm import ExpectedOutput
from kernel_agent.sandbox.protocol import Call, Describe, Stage


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


class DeviceWorkerSession(WorkerSession):
    def __init__(self, *args: Any, exchange: DeviceExchange, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.exchange = exchange

    def stage(self, sets: list[list[torch.Tensor]]) -> str:
        """The request's device buffers, allocated by the trusted side and opened once by the worker."""
        layouts = call_layouts(sets)
        key = json.dumps(layouts)
        if key not in self.staged:
            self.staged[key] = str(len(self.staged))
            specs = [[TensorSpec(tuple(t.shape), dtype_name(t.dtype)) for t in inputs] for inputs in sets]
            handles = self._device(lambda: self.exchange.stage(self.spec.role, key, specs))  # by layout: a
            # confirmation's fresh worker of the same side reuses the buffers of the same layout
            self.request(Stage(self.staged[key], layouts, handles), "stage")
        return self.staged[key]

    def timed_calls(
        self,
        sets: list[list[torch.Tensor]],
        integrity: bool,
        watched: dict[int, tuple[ExpectedOutput, ...]] | None = None,
    ) -> Timed:
        """One timed request: quiet device, fresh inputs and the trusted flush while frozen; the clock from thaw
        to reply; quiet device again, then the untimed description (handles, not host copies)."""
        layout = json.dumps(call_layouts(sets))
        key = self.staged.get(layout)
        assert key is not None, "stage() every layout before the first placement of timed inputs"
        frozen = self.control is None or self.control.frozen
        self._device(lambda: self.exchange.before_request(self.spec.role, layout, sets, frozen))
        _, began, t0, t1 = self._clocked(Call(key), "timed")
        cpu_ns, window_ns = self.cpu_of_last_request(), time.perf_counter_ns() - began
        self._device(lambda: self.exchange.after_reply(self.spec.role, layout, True))
        reply = self.request(Describe(integrity), "describe")
        claims = described_reply(reply, len(sets), cuda=True)
        return Timed(
            trusted_ms=(t1 - t0) / 1e6,
            host_ms=claims.host_ms,
            device_ms=claims.device_ms,
            cpu_ns=cpu_ns,
            window_ns=window_ns,
            wall_ns=t1 - began,
            outputs=[self._device(lambda o=o: parse_handles(o)) for o in claims.outputs],
            inputs=self.exchange.buffers(self.spec.role, layout),  # the trusted buffers as the kernel left them
        )

    def ping(self) -> float:
        """The floor's ping, then (both workers frozen, nothing queued) the probe's idle reading."""
        floor = super().ping()
        self.exchange.idle_probe()
        return floor

    def read(self, refs: list[Any], expected: tuple[ExpectedOutput, ...]) -> list[torch.Tensor]:
        """An audited call's outputs, opened on the device while the worker is frozen and copied there (device
        to device): they are judged after the block, when the worker has reused that memory."""
        wanted = [(e.shape, dtype_name(e.dtype)) for e in expected]
        frozen = self.control is not None and self.control.frozen
        opened = self._device(lambda: self.exchange.open([_json(h) for h in refs], wanted, frozen))
        return [t.clone() for t in opened]

    def unchanged(self, refs: list[Any], originals: list[torch.Tensor]) -> list[int]:
        """Indices of the inputs the kernel left different from what was placed: the trusted buffers, read while
        the worker is frozen and the device quiet, against the inputs as drawn, on the device."""
        assert self.control is not None and self.control.frozen
        if len(refs) != len(originals):
            return list(range(max(len(refs), len(originals))))
        return [i for i, (a, b) in enumerate(zip(refs, originals)) if not torch.equal(a, b.to(a.device))]

    def members(self) -> list[int]:
        """This sandbox's processes (host pids), for the foreign-load rule: NVML names contexts by host pid."""
        return self.control.members() if self.control is not None else []

    def _device(self, step: Any) -> Any:
        """A device step whose refusal is the worker's verdict (a WorkerFailure, as every other reply's)."""
        try:
            return step()
        except StatusError as exc:
            raise WorkerFailure(exc.status, exc.reason) from None


def _json(handle: Any) -> Any:
    return handle.to_json() if isinstance(handle, Handle) else handle
