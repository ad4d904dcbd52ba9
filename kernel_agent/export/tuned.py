"""Per-shape tuned config tables as an export input, and the JSON files they ship as.

The tables come from variant selection (DESIGN.md section 14): for one kernel on one device, the config
picked per benchmarked shape. Export takes them as typed records and writes one file per (kernel,
device), named with the device (`runtime/tuned.py` reads them back, nearest shape first).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from kernel_agent.export.runtime.tuned import table_file


@dataclass(frozen=True)
class TunedConfig:
    """The config tuned for one shape: sizes by name (`{"rows": 1024, "cols": 4096}`) and the values."""

    shape: dict[str, int]
    config: dict[str, int | str]


@dataclass(frozen=True)
class TunedTable:
    """Every tuned shape of one kernel on one device, and the config used away from all of them."""

    device_name: str
    default: dict[str, int | str]
    configs: list[TunedConfig] = field(default_factory=list)


def write_table(folder: Path, kernel: str, table: TunedTable) -> Path:
    """`folder/<kernel>_<device slug>.json`: {kernel, device_name, default, configs: [{shape, config}]}."""
    folder.mkdir(parents=True, exist_ok=True)
    path = table_file(folder, kernel, table.device_name)
    data = {
        "kernel": kernel,
        "device_name": table.device_name,
        "default": table.default,
        "configs": [{"shape": c.shape, "config": c.config} for c in table.configs],
    }
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return path
