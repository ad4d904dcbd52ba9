"""What this machine can do at best: copy bandwidth and matmul rate per dtype, measured now
(`measure_ceilings`) or stored under `fingerprint_key` (`ceilings_to_dict` / `ceilings_from_dict`).

Only torch is needed here (no database, no LLM client).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from kernel_agent.core.config import check_known_fields
from kernel_agent.measure.contention import contention, core_times
from kernel_agent.measure.error import ProfileError
from kernel_agent.problem.load import torch_dtype


@dataclass
class Ceilings:
    """What this machine can do at best: copy bandwidth and matmul rate per dtype."""

    fingerprint: str  # fingerprint_key(device): the storage key
    device_name: str
    memory_gbps: float  # GB/s (1e9 bytes), bytes read + written by a large copy
    gflops: dict[str, float] = field(default_factory=dict)  # dtype -> GFLOP/s of a large matmul
    measured_at: str = ""  # ISO 8601, UTC
    device: str = "cpu"
    spread: float = 0.0  # how far two passes of the copy bandwidth differed, relative to the faster
    load: float = 0.0  # the share of the machine's cores other processes took while it was measured

    def higher(self, other: Ceilings) -> Ceilings:
        """The higher of two measurements of each ceiling (so the lower floor: a floor too low flags nothing
        honest, one too high flags it)."""
        rates = {d: max(self.gflops.get(d, 0.0), other.gflops.get(d, 0.0)) for d in {*self.gflops, *other.gflops}}
        return dataclasses.replace(
            other, memory_gbps=max(self.memory_gbps, other.memory_gbps), gflops=rates, spread=other.spread
        )

    def peak_gflops(self, dtype: str) -> tuple[float | None, str | None]:
        """The fastest measured matmul rate a `dtype` kernel could use, and its dtype.

        A kernel may compute in a wider type than its inputs (bfloat16 data through float32
        FMAs: torch's own CPU bfloat16 matmul runs ~100x slower than its float32 one here), so
        every measured dtype at least as wide counts. With none of those measured, the fastest
        rate of any dtype stands in (an optimistic ceiling: a floor too low, never too high)."""
        return peak_rate(self.gflops, dtype)


def peak_rate(gflops: dict[str, float], dtype: str) -> tuple[float | None, str | None]:
    """`Ceilings.peak_gflops` over a plain dtype -> GFLOP/s mapping (the report's stored copy)."""
    measured = {d: r for d, r in gflops.items() if r > 0}
    if not measured:
        return None, None
    width = _bits(dtype)
    usable = [d for d in measured if width is None or (_bits(d) or 0) >= width] or list(measured)
    best = max(usable, key=lambda d: (measured[d], d == dtype))
    return measured[best], best


def _bits(dtype: str) -> int | None:
    """Bits per element of a torch dtype name; None for a name torch does not know."""
    found = getattr(torch, dtype, None)
    return found.itemsize * 8 if isinstance(found, torch.dtype) else None


def fingerprint_key(device: str, threads: int | None = None) -> str:
    """The key ceilings are stored under: device name, torch version and thread count."""
    from kernel_agent.core.fingerprint import environment_key, fingerprint

    return environment_key(fingerprint(device, threads if threads is not None else torch.get_num_threads()))


def ceilings_to_dict(ceilings: Ceilings) -> dict[str, Any]:
    return asdict(ceilings)


def ceilings_from_dict(data: dict[str, Any]) -> Ceilings:
    """Decode stored ceilings strictly: unknown keys and non-positive rates are errors."""
    check_known_fields(Ceilings, data, "ceilings")
    bandwidth = data.get("memory_gbps")
    if not isinstance(bandwidth, (int, float)) or not bandwidth > 0:
        raise ValueError("ceilings need a positive memory_gbps")
    gflops = data.get("gflops", {})
    if not isinstance(gflops, dict) or not all(isinstance(v, (int, float)) and v > 0 for v in gflops.values()):
        raise ValueError("ceilings gflops must map dtype names to positive numbers")
    return Ceilings(
        fingerprint=str(data.get("fingerprint", "")),
        device_name=str(data.get("device_name", "")),
        memory_gbps=float(bandwidth),
        gflops={str(k): float(v) for k, v in gflops.items()},
        measured_at=str(data.get("measured_at", "")),
        device=str(data.get("device", "cpu")),
        spread=float(data.get("spread", 0.0)),
        load=float(data.get("load", 0.0)),
    )


def _best_seconds(fn: Callable[[], Any], repeats: int, device: str) -> float:
    """The fastest of `repeats` timed calls (after the caller's warm-up)."""
    if device == "cuda":
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1000)
        return min(times)
    best = math.inf
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - began)
    return best


CORES = os.cpu_count() or 1


def measure_bandwidth(device: str, nbytes: int | None = None, repeats: int | None = None) -> float:
    """GB/s of the best of several large copies, counting bytes read plus bytes written."""
    cuda = device == "cuda"
    nbytes = nbytes or ((1 << 30) if cuda else (256 << 20))
    repeats = repeats or (20 if cuda else 5)
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    src.fill_(1.0)
    dst = torch.empty_like(src)
    dst.copy_(src)  # first touch and warm-up
    if cuda:
        torch.cuda.synchronize()
    seconds = _best_seconds(lambda: dst.copy_(src), repeats, device)
    moved = 2 * src.numel() * src.element_size()
    return moved / seconds / 1e9


def measure_matmul(device: str, dtype: str, n: int, repeats: int) -> float:
    """GFLOP/s of the best of `repeats` n x n matmuls."""
    dt = torch_dtype(dtype)
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=torch.float32, generator=generator).to(dt)
    b = torch.randn(n, n, device=device, dtype=torch.float32, generator=generator).to(dt)
    out = torch.empty(n, n, device=device, dtype=dt)
    torch.matmul(a, b, out=out)  # warm-up: library init, heuristics, caches
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = _best_seconds(lambda: torch.matmul(a, b, out=out), repeats, device)
    return 2 * n**3 / seconds / 1e9


def _cpu_matmul_rate(dtype: str, budget_s: float, target_call_s: float = 0.04, repeats: int = 3) -> float | None:
    """Size a CPU matmul from a small probe so each of `repeats` calls takes about `target_call_s`;
    None when even the probe is too slow."""
    began = time.perf_counter()
    probe_n = 256
    probe = measure_matmul("cpu", dtype, probe_n, 1)
    left = budget_s - (time.perf_counter() - began)
    if left < 3 * (time.perf_counter() - began):
        return None  # too slow to measure within the budget (e.g. float16 without hardware support)
    n = max(probe_n, min(4096, int((target_call_s * probe * 1e9 / 2) ** (1 / 3)) // 128 * 128))
    while n > probe_n and (repeats + 1) * 2 * n**3 / (probe * 1e9) > left:
        n = max(probe_n, n // 2 // 128 * 128)
    return max(probe, measure_matmul("cpu", dtype, n, repeats))


def measure_ceilings(device: str, budget_s: float = 2.0, threads: int | None = None) -> Ceilings:
    """Measure the memory bandwidth and matmul rates of `device` ("cpu" or "cuda") now.

    CPU: a 256 MiB copy (best of 5) and float32 matmuls sized to ~40 ms a call;
    bfloat16 too when a probe says it fits in what is left of `budget_s`.
    CUDA: a 1 GiB copy and 8192^2 matmuls in float32 (TF32 off), float16 and
    bfloat16, timed with CUDA events (best of several).
    `threads`: the CPU thread count the kernels will run with (the fingerprint's), default all.
    """
    from kernel_agent.core.fingerprint import device_name

    before = core_times(None)
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ProfileError("no CUDA device is visible here; measure ceilings on cpu")
        gbps = measure_bandwidth("cuda")
        rates: dict[str, float] = {}
        previous = torch.get_float32_matmul_precision()
        try:
            torch.set_float32_matmul_precision("highest")  # TF32 off: the float32 ceiling is true float32
            rates["float32"] = measure_matmul("cuda", "float32", 8192, 5)
        finally:
            torch.set_float32_matmul_precision(previous)
        for dtype in ("float16", "bfloat16"):
            rates[dtype] = measure_matmul("cuda", dtype, 8192, 20)
        torch.cuda.empty_cache()
    elif device == "cpu":
        saved = torch.get_num_threads()
        torch.set_num_threads(threads or saved)
        try:
            began = time.perf_counter()
            gbps = measure_bandwidth("cpu")
            rates = {}
            rate = _cpu_matmul_rate("float32", max(0.5, budget_s - (time.perf_counter() - began)))
            if rate is not None:
                rates["float32"] = rate
            left = budget_s - (time.perf_counter() - began)
            if left > 0.3:
                rate = _cpu_matmul_rate("bfloat16", left)
                if rate is not None:
                    rates["bfloat16"] = rate
        finally:
            torch.set_num_threads(saved)
    else:
        raise ProfileError(f"device must be cpu or cuda, not {device!r}")
    second = measure_bandwidth(device)  # a second pass: how far one measurement is from the next
    busy = contention(before, core_times(None), 0, CORES)
    return Ceilings(
        fingerprint=fingerprint_key(device, threads),
        device_name=device_name(device),
        memory_gbps=max(gbps, second),
        gflops=rates,
        measured_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        device=device,
        spread=round(abs(gbps - second) / max(gbps, second), 4),
        load=round(busy.other, 4),
    )
