"""torch.profiler over a few calls of a kernel: top operators by self time, launch counts.

Two callers: the sandbox worker profiles a candidate in its own process after the
timing is done (`op_breakdown`), and `kernel-agent profile` profiles the trusted
baseline in-process. Numbers that come back from a worker are the candidate's
claims: `sanitize` keeps only well-typed, bounded fields, and nothing here ever
feeds a verdict (the profile is advice for the prompt, the report and the user).

Imports torch only, so the worker can use it without the problem or database code.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

MARKER = "kernel_agent::call"
LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx")
SYNC_NAMES = ("cudaDeviceSynchronize", "cudaStreamSynchronize")
MAX_TOP_OPS = 12
MAX_NAME = 120


def op_breakdown(call: Callable[[], Any], device: str, calls: int = 3, top: int = 8) -> dict[str, Any]:
    """Profile `calls` calls of `call()` (already warmed up) and summarise them."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    cuda = device == "cuda"

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch.no_grad(), profile(activities=activities) as prof:
        began = time.perf_counter()
        for _ in range(calls):
            with record_function(MARKER):
                call()
                sync()
        wall_s = time.perf_counter() - began
    events = list(prof.events())
    top_level = sum(
        1 for e in events if e.cpu_parent is not None and e.cpu_parent.name == MARKER and e.name.startswith("aten::")
    )
    launches = sum(1 for e in events if e.name in LAUNCH_NAMES)
    ops, outside_us = [], 0.0
    for event in prof.key_averages():
        self_cpu_us = float(event.self_cpu_time_total)
        if event.key == MARKER:
            outside_us += self_cpu_us
            continue
        if event.key in SYNC_NAMES or event.key in LAUNCH_NAMES:
            continue  # our own syncs; launches are counted above
        op = {"name": event.key, "count": int(event.count), "self_cpu_ms": self_cpu_us / 1e3}
        if cuda:
            self_dev_us = getattr(event, "self_device_time_total", None)
            if self_dev_us is None:
                self_dev_us = getattr(event, "self_cuda_time_total", 0.0)
            op["self_cuda_ms"] = float(self_dev_us or 0.0) / 1e3
        ops.append(op)
    key = "self_cuda_ms" if cuda else "self_cpu_ms"
    ops.sort(key=lambda op: op[key], reverse=True)
    return {
        "device": device,
        "calls": calls,
        "wall_ms_per_call": wall_s * 1e3 / calls,
        "outside_ops_ms_per_call": outside_us
        / 1e3
        / calls,  # e.g. a ctypes C++ kernel: invisible to the operator table
        "torch_ops_per_call": top_level / calls,  # top-level aten operators under each call
        "launches_per_call": (launches if cuda else top_level)
        / calls,  # CUDA: launch API calls; CPU: top-level aten ops
        "top_ops": [op for op in ops[:top] if op[key] > 0 or op["count"]],
    }


def sanitize(claimed: Any, device: str) -> dict[str, Any] | None:
    """Keep only the bounded, well-typed fields of a breakdown a worker sent; None if it is junk."""
    if not isinstance(claimed, dict):
        return None
    clean: dict[str, Any] = {"device": device}
    for key in ("calls", "wall_ms_per_call", "outside_ops_ms_per_call", "torch_ops_per_call", "launches_per_call"):
        value = _finite(claimed.get(key))
        if value is None:
            return None
        clean[key] = int(value) if key == "calls" else value
    ops = claimed.get("top_ops")
    if not isinstance(ops, list):
        return None
    clean["top_ops"] = []
    for op in ops[:MAX_TOP_OPS]:
        if not isinstance(op, dict) or not isinstance(op.get("name"), str):
            return None
        entry: dict[str, Any] = {"name": _printable(op["name"])}
        for key in ("count", "self_cpu_ms", "self_cuda_ms"):
            value = _finite(op.get(key))
            if value is not None:
                entry[key] = int(value) if key == "count" else value
        clean["top_ops"].append(entry)
    triton = claimed.get("triton")
    if isinstance(triton, list):
        clean["triton"] = [_clean_triton(meta) for meta in triton[:MAX_TOP_OPS] if isinstance(meta, dict)]
    return clean


TRITON_INT_KEYS = ("n_regs", "n_spills", "n_max_threads", "shared_bytes", "num_warps", "num_stages", "num_ctas")


def _clean_triton(meta: dict[str, Any]) -> dict[str, Any]:
    clean: dict[str, Any] = {key: int(meta[key]) for key in TRITON_INT_KEYS if _finite(meta.get(key)) is not None}
    if isinstance(meta.get("name"), str):
        clean["name"] = _printable(meta["name"])
    return clean


def compiled_line(breakdown: dict[str, Any] | None) -> str:
    """Triton compile metadata on one line: registers, spills, shared memory, warps, stages."""
    parts = []
    for meta in (breakdown or {}).get("triton") or []:
        facts = [
            f"{meta[k]} {label}"
            for k, label in (
                ("n_regs", "registers/thread"),
                ("n_spills", "spills"),
                ("num_warps", "warps"),
                ("num_stages", "stages"),
            )
            if k in meta
        ]
        if "shared_bytes" in meta:
            facts.append(f"{meta['shared_bytes'] / 1024:.1f} KiB shared")
        parts.append(f"{meta.get('name', 'kernel')}: {', '.join(facts)}")
    return "; ".join(parts)


def summary_line(breakdown: dict[str, Any] | None, top: int = 3) -> str:
    """The heaviest operators by share of self time, and the per-call launch count, on one line."""
    if not breakdown or not breakdown.get("top_ops"):
        return ""
    cuda = breakdown.get("device") == "cuda"
    key = "self_cuda_ms" if cuda else "self_cpu_ms"
    ops: Sequence[dict[str, Any]] = breakdown["top_ops"]
    # On CUDA the shares are of device time; on CPU, host time outside any operator counts too.
    outside = 0.0 if cuda else breakdown.get("outside_ops_ms_per_call", 0.0) * breakdown.get("calls", 1)
    total = sum(op.get(key, 0.0) for op in ops) + outside
    parts = [
        f"{op['name']} x{op.get('count', 0)} {100 * op.get(key, 0.0) / total:.0f}%" for op in ops[:top] if total > 0
    ]
    if total > 0 and outside / total >= 0.05:
        parts.append(f"outside torch ops {100 * outside / total:.0f}%")
    what = "kernel launches" if breakdown.get("device") == "cuda" else "torch ops"
    return f"{', '.join(parts)}; {breakdown.get('launches_per_call', 0):.3g} {what} per call"


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and 0 <= value < 1e12 else None


def _printable(name: str) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in name)
    return text[:MAX_NAME]


# --- Triton compile metadata (GPU only) -----------------------------------------------------------


def triton_compile_metadata(compiled_kernel: Any) -> dict[str, Any]:
    """Registers, spills, shared memory, warps and stages of a Triton CompiledKernel (what `kernel[grid](...)` returns).

    Best effort and GPU only: `n_regs`/`n_spills` exist once the binary is loaded
    (Triton 3.x loads it lazily, so this triggers `_init_handles()`); returns {}
    when nothing is available (no GPU, interpreter mode, not a CompiledKernel).
    """
    import torch

    if compiled_kernel is None or not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        return {}
    result: dict[str, Any] = {}
    try:
        if getattr(compiled_kernel, "module", "absent") is None and hasattr(compiled_kernel, "_init_handles"):
            compiled_kernel._init_handles()
    except Exception:  # noqa: BLE001 - best effort: an unloadable binary just has no register counts
        pass
    for key in ("n_regs", "n_spills", "n_max_threads"):
        value = getattr(compiled_kernel, key, None)
        if isinstance(value, int):
            result[key] = value
    metadata = getattr(compiled_kernel, "metadata", None)
    for key, name in (
        ("shared", "shared_bytes"),
        ("num_warps", "num_warps"),
        ("num_stages", "num_stages"),
        ("num_ctas", "num_ctas"),
        ("name", "name"),
    ):
        value = metadata.get(key) if isinstance(metadata, dict) else getattr(metadata, key, None)
        if value is not None:
            result[name] = value
    if "name" not in result and isinstance(getattr(compiled_kernel, "name", None), str):
        result["name"] = compiled_kernel.name
    return result


def triton_kernels_metadata(namespace: dict[str, Any], limit: int = 8) -> list[dict[str, Any]]:
    """Compile metadata of every Triton kernel compiled so far from a module's globals.

    Walks `@triton.jit` functions (through `@triton.autotune`/`@triton.heuristics` wrappers,
    which keep the function in `.fn`) and their per-device caches of compiled kernels.
    """
    found: list[dict[str, Any]] = []
    for value in list(namespace.values()):
        jit, depth = value, 0
        while not hasattr(jit, "device_caches") and hasattr(jit, "fn") and depth < 4:
            jit, depth = jit.fn, depth + 1
        caches = getattr(jit, "device_caches", None)
        if not isinstance(caches, dict):
            continue
        for entry in list(caches.values()):
            kernel_cache = entry[0] if isinstance(entry, tuple) and entry else None
            for compiled in list(kernel_cache.values()) if isinstance(kernel_cache, dict) else []:
                meta = triton_compile_metadata(compiled)
                if meta:
                    found.append(meta)
                if len(found) >= limit:
                    return found
    return found
