"""Per-shape tuned configs at run time: the nearest tuned shape on this device, else the default.

Why nearest rather than exact: a table is tuned on a few shapes and a caller's shape is rarely one
of them; the config of the closest tuned shape (distance on log2 of each size, so 1024 -> 2048 is as
far as 64 -> 128) is the best guess the table offers. A table lives in one JSON file per (kernel,
device) named `<kernel>_<device slug>.json` (see `slug`), so a package tuned on two GPUs carries two
files and each machine reads its own. No file for this device, or an empty table: the default.
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import re
from pathlib import Path
from typing import Any


def slug(device_name: str) -> str:
    """A device name as a file-name part: `NVIDIA H100 80GB HBM3` -> `nvidia_h100_80gb_hbm3`."""
    return re.sub(r"[^a-z0-9]+", "_", device_name.lower()).strip("_") or "device"


def cpu_name() -> str:
    """The CPU's model name, as kernel-agent records it (`/proc/cpuinfo`), with the core count."""
    name = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as handle:
            name = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), name)
    except OSError:
        pass
    return f"{name} ({os.cpu_count()} cores)"


@functools.lru_cache(maxsize=8)
def current_device_name(device: str) -> str:
    if device == "cuda":
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    return cpu_name()


def table_file(folder: Path, kernel: str, device_name: str) -> Path:
    return folder / f"{kernel}_{slug(device_name)}.json"


def distance(a: dict[str, Any], b: dict[str, Any]) -> float:
    """Log2 distance over the sizes both shapes name; a shape sharing no size is infinitely far."""
    shared = [k for k in a if k in b and a[k] > 0 and b[k] > 0]
    if not shared:
        return math.inf
    return math.sqrt(sum(math.log2(a[k] / b[k]) ** 2 for k in shared))


def nearest(entries: list[dict[str, Any]], shape: dict[str, int], default: dict[str, Any]) -> dict[str, Any]:
    """The config of the entry whose `shape` is nearest `shape` (ties: the first), or `default`."""
    best, best_distance = default, math.inf
    for entry in entries:
        d = distance(entry["shape"], shape)
        if d < best_distance:
            best, best_distance = entry["config"], d
    return dict(best)


def config_for(
    folder: Path, kernel: str, device_name: str, shape: dict[str, int], default: dict[str, Any]
) -> dict[str, Any]:
    """The tuned config for `shape` on `device_name` from its table file; `default` without one."""
    table = read_table(table_file(folder, kernel, device_name))
    if table is None:
        return dict(default)
    return nearest(table.get("configs", []), shape, table.get("default", default))


@functools.lru_cache(maxsize=64)
def read_table(path: Path) -> dict[str, Any] | None:
    """A table file's contents, read once per process: a dispatching kernel looks it up on every call."""
    return json.loads(path.read_text()) if path.is_file() else None
