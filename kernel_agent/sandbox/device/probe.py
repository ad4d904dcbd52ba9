"""The orchestrator's own view of the device (DESIGN.md section 18): the probe that tells a quiet device from one
still running another context's work, the L2 flush and persisting-L2 reset it makes in its own context before
each request, and NVML's compute processes where `pynvml` imports. GPU only: never run here."""

from __future__ import annotations

import ctypes
import time
from typing import Any


class Probe:
    """One tiny kernel on the orchestrator's own stream, host clock around launch and sync (ms)."""

    def __init__(self, device: int = 0) -> None:
        import torch

        self.torch = torch
        self.stream = torch.cuda.Stream(device)
        self.cell = torch.zeros(1, device=f"cuda:{device}")
        self()  # the first launch loads the kernel: never a reading

    def __call__(self) -> float:
        t0 = time.perf_counter_ns()
        with self.torch.cuda.stream(self.stream):
            self.cell.add_(1)
        self.stream.synchronize()
        return (time.perf_counter_ns() - t0) / 1e6


class TrustedFlush:
    """max(2 x L2, 64 MiB) written in the orchestrator's context (the L2 is one for every context), and the
    persisting lines reset, before each request: the candidate's process can neither skip nor shrink it."""

    def __init__(self, device: int = 0) -> None:
        import torch

        self.torch = torch
        size = max(2 * torch.cuda.get_device_properties(device).L2_cache_size, 64 << 20)
        self.buffer = torch.empty(size, dtype=torch.uint8, device=f"cuda:{device}")
        try:
            self.reset = ctypes.CDLL("libcuda.so.1").cuCtxResetPersistingL2Cache
        except (OSError, AttributeError):
            self.reset = None

    def __call__(self) -> None:
        if self.reset is not None:
            self.reset()
        self.buffer.fill_(1)
        self.torch.cuda.synchronize()


def _nvml(index: int) -> tuple[Any, Any] | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:  # noqa: BLE001 - no pynvml or no driver: the probe alone judges
        return None


def compute_pids(index: int = 0) -> list[int]:
    """Host pids with a compute context on the device (empty without NVML)."""
    found = _nvml(index)
    if found is None:
        return []
    pynvml, handle = found
    try:
        return [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
    except Exception:  # noqa: BLE001
        return []
