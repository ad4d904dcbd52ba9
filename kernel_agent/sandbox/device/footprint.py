"""Device memory for one `--gpu-data device` evaluation, sized before anything runs and refused like host memory
(DESIGN.md section 18, step 4): both workers' request buffers and outputs, the kernels' and the reference's
temporaries, the orchestrator's kept inputs, the L2 flush, three CUDA contexts; the float64 gold on top only
when it fits, else the same-dtype reference at twice the tolerances (section 4's rule)."""

from __future__ import annotations

from dataclasses import dataclass

from kernel_agent.core.verdict import Refusal, RefusalKind, Status, StatusError
from kernel_agent.problem.footprint import Footprint

GIB = 1 << 30
CONTEXT_BYTES = GIB // 2  # a CUDA context with torch's kernels loaded, per process (three)
MAX_CALLS_PER_REQUEST = 64  # as ab_timing: a request's buffers hold at most this many calls...
REQUEST_CAP = GIB  # ...and no more than this of them beyond one call (short kernels are small)
MIN_L2_FLUSH = 64 << 20


def per_request(one_call: int) -> int:
    """Bytes of a request's buffers for data of `one_call` bytes per call."""
    return max(one_call, min(MAX_CALLS_PER_REQUEST * one_call, REQUEST_CAP))


@dataclass(frozen=True)
class DeviceFootprint:
    without_gold: int
    gold: int  # the float64 gold's own share, on top

    @property
    def with_gold(self) -> int:
        return self.without_gold + self.gold


def device_footprint(footprint: Footprint, item_bytes: int, l2_bytes: int) -> DeviceFootprint:
    """`item_bytes`: the problem's narrowest float dtype's element size (the gold widens it to 8)."""
    inputs, outputs = per_request(footprint.inputs), per_request(footprint.outputs)
    workers = 2 * (inputs + outputs) + 2 * footprint.temporaries
    trusted = inputs + footprint.outputs + footprint.temporaries  # kept inputs, the same-dtype reference
    fixed = 3 * CONTEXT_BYTES + max(2 * l2_bytes, MIN_L2_FLUSH) + 3 * footprint.parameters
    widen = 8 // max(1, min(item_bytes, 8))
    gold = widen * (footprint.inputs + footprint.outputs + footprint.temporaries) + footprint.gold_workspace
    return DeviceFootprint(workers + trusted + fixed, gold)


def device_refusal(needed: DeviceFootprint, budget: int | None, free: int, described: str) -> StatusError | None:
    """The too_large refusal when even the evaluation without the gold does not fit, else None. `budget`:
    `--device-memory-budget` in bytes; without it, the device's free memory read when nothing is booked."""
    limit = budget if budget is not None else free
    if needed.without_gold <= limit:
        return None
    where = "the --device-memory-budget" if budget is not None else "the device's free memory"
    reason = (
        f"too large for the GPU's device-resident path: {described}; an evaluation needs about "
        f"{needed.without_gold / GIB:.2f} GB of device memory and {where} is {limit / GIB:.2f} GB "
        "(raise it with --device-memory-budget GB, use --gpu-data host, or shrink the problem's sizes)"
    )
    return StatusError(Status.REJECTED, reason, Refusal(RefusalKind.TOO_LARGE, needed.without_gold, limit, "device"))


def gold_on_device(needed: DeviceFootprint, budget: int | None, free: int) -> bool:
    """Whether the float64 gold is computed on the device (else the same-dtype reference at 2x tolerances)."""
    return needed.with_gold <= (budget if budget is not None else free)
