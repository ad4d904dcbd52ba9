"""What an evaluation on the device path sets up before anything runs (DESIGN.md section 18): the refusal when
its device memory cannot fit, and the exchange both sides share, with the real GPU parts."""

from __future__ import annotations

from kernel_agent.problem.footprint import Footprint
from kernel_agent.sandbox.device.exchange import DeviceExchange, DeviceParts
from kernel_agent.sandbox.device.footprint import device_footprint, device_refusal, gold_on_device

FLOAT_BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}


def check_device_memory(footprint: Footprint, dtypes: list[str], budget_gb: float | None, described: str) -> bool:
    """Raise the too_large refusal when the evaluation does not fit the device; else whether the float64 gold
    stays on the device. Reads the device's free memory and L2 size (GPU only)."""
    import torch

    item = min((FLOAT_BYTES.get(d, 4) for d in dtypes), default=4)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    needed = device_footprint(footprint, item, l2)
    free, _total = torch.cuda.mem_get_info()
    budget = None if budget_gb is None else int(budget_gb * (1 << 30))
    refused = device_refusal(needed, budget, int(free), described)
    if refused is not None:
        raise refused
    return gold_on_device(needed, budget, int(free))


def new_exchange() -> DeviceExchange:
    """The exchange with the real transport, probe, flush and NVML (GPU only)."""
    from kernel_agent.sandbox.device.cuda_ipc import CudaIpcTransport
    from kernel_agent.sandbox.device.probe import Probe, TrustedFlush, compute_pids
    from kernel_agent.sandbox.device.telemetry import read_state

    return DeviceExchange(DeviceParts(CudaIpcTransport(), Probe(), TrustedFlush(), compute_pids, read_state))
