"""The device facts the analytical selector reasons with: measured ceilings (stored per fingerprint) and cache
sizes (the CPU's from sysfs, a GPU's from its properties)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class DeviceFacts:
    kind: str  # cpu or cuda
    units: int  # cores (threads of the evaluation) or SMs
    memory_gbps: float
    gflops: float  # the fastest measured matmul rate of the dtype
    l1_bytes: int
    l2_bytes: int
    l3_bytes: int

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def cpu_caches(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> dict[int, int]:
    """Level -> bytes of the data or unified caches of core 0 (empty where sysfs does not say)."""
    sizes: dict[int, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
        sizes[level] = int(size.rstrip("KMG")) * scale
    return sizes


def device_facts(ceilings: Any, threads: int | None, dtype: str = "float32") -> DeviceFacts:
    """From stored `measure.ceilings.Ceilings` (None: rough defaults, so the model still ranks)."""
    memory = ceilings.memory_gbps if ceilings is not None else 10.0
    rate = (ceilings.peak_gflops(dtype)[0] if ceilings is not None else None) or 50.0
    if ceilings is not None and ceilings.device == "cuda":
        import torch

        props = torch.cuda.get_device_properties(0)
        return DeviceFacts("cuda", props.multi_processor_count, memory, rate, 128 << 10, props.L2_cache_size, 0)
    caches = cpu_caches()
    return DeviceFacts(
        "cpu",
        threads or os.cpu_count() or 1,
        memory,
        rate,
        caches.get(1, 32 << 10),
        caches.get(2, 1 << 20),
        caches.get(3, 8 << 20),
    )
