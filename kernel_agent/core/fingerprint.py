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
    }
