"""What a sandbox did, measured from outside its process: CPU and wall time per kind of request, and
the most threads, processes, memory and cores it held. Reported with every verdict (DESIGN.md section 6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Phase:
    """CPU and wall time the sandbox spent in one kind of request."""

    requests: int = 0
    cpu_ns: int = 0
    wall_ns: int = 0

    def add(self, cpu_ns: int, wall_ns: int) -> None:
        self.requests += 1
        self.cpu_ns += cpu_ns
        self.wall_ns += wall_ns

    def to_json(self) -> dict[str, float]:
        return {
            "requests": self.requests,
            "cpu_ms": round(self.cpu_ns / 1e6, 3),
            "wall_ms": round(self.wall_ns / 1e6, 3),
        }


@dataclass
class Accounting:
    """The sandbox's work per phase, measured from outside its process."""

    method: str
    phases: dict[str, Phase] = field(default_factory=dict)
    idle_cpu_ns: int = 0
    max_threads: int = 0
    max_processes: int = 0
    peak_rss_bytes: int = 0
    peak_tasks: int | None = None
    huge_pages_kb: int = 0
    cores: str = "any"
    freezer: str = "SIGSTOP"  # what holds the sandbox still between requests

    def phase(self, name: str) -> Phase:
        return self.phases.setdefault(name, Phase())

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "phases": {k: v.to_json() for k, v in self.phases.items()},
            "idle_cpu_ms": round(self.idle_cpu_ns / 1e6, 3),
            "max_threads": self.max_threads,
            "max_processes": self.max_processes,
            "peak_rss_mb": round(self.peak_rss_bytes / (1 << 20), 1),
            "peak_tasks": self.peak_tasks,
            "cores": self.cores,
            "huge_pages_kb": self.huge_pages_kb,
            "freezer": self.freezer,
        }
