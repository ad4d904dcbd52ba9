"""The environment fingerprint stored with every verdict (device, versions, threads)."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
from typing import Any

import torch

from kernel_agent import __version__


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


@functools.cache
def compiler() -> str | None:
    """The first line of `gcc --version`: the C++ backend's compiler (None where there is none)."""
    import subprocess

    try:
        out = subprocess.run(["gcc", "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


def driver(device: str) -> str | None:
    """The CUDA driver's version on a GPU (None on a CPU, or where torch cannot say)."""
    if device != "cuda" or not torch.cuda.is_available():
        return None
    try:
        version = torch._C._cuda_getDriverVersion()  # e.g. 12040
    except (AttributeError, RuntimeError):
        return None
    return f"{version // 1000}.{version % 1000 // 10}"


def clock_mhz(device: str) -> float | None:
    """The device's top clock where the machine says (a CPU's cpufreq maximum, a GPU's clock rate), else None."""
    if device == "cuda" and torch.cuda.is_available():
        rate = getattr(torch.cuda.get_device_properties(0), "clock_rate", None)  # kHz, where torch exposes it
        return round(rate / 1000, 1) if rate else None
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") as handle:
            return round(int(handle.read().strip()) / 1000, 1)
    except (OSError, ValueError):
        return None


def device_name(device: str) -> str:
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"{cpu_name()} ({os.cpu_count()} cores)"


def fingerprint(device: str, threads: int) -> dict[str, Any]:
    return {
        "device_name": device_name(device),
        "torch": torch.__version__,
        "triton": _version("triton"),
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "kernel_agent": __version__,
        "threads": threads,
        "platform": platform.platform(),
        "compiler": compiler(),
        "driver": driver(device),
        "clock_mhz": clock_mhz(device),
    }


def environment_key(facts: dict[str, Any]) -> str:
    """`fingerprint_key` from a stored environment (a verdict's `environment`)."""
    return f"{facts.get('device_name')} | torch {facts.get('torch')} | {facts.get('threads')} threads"
