"""Reference points as records: which point (`eager`, `compile`, `compile:MODE`) and what it measured.

Stored by the database and read by every view; measured by `evaluate/references.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernel_agent.core.config import Choice


class ReferenceKind(Choice):
    EAGER = "eager"  # the reference as written: ATen, oneDNN, cuBLAS
    COMPILE = "compile"  # torch.compile of it (inductor; default mode unless a Reference names another)


# torch.compile's modes (`torch._inductor.list_mode_options()`); "default" is the `compile` point itself.
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass(frozen=True)
class Reference:
    """Which reference point: `eager`, `compile` (inductor, default mode) or `compile:MODE`, added by
    `--compile-mode MODE` (for example max-autotune-no-cudagraphs on a GPU). `value` is its stored name."""

    kind: ReferenceKind
    mode: str = ""

    @property
    def value(self) -> str:
        return f"{self.kind.value}:{self.mode}" if self.mode else self.kind.value

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, name: str) -> Reference:
        kind, _, mode = name.partition(":")
        return cls(ReferenceKind(kind), mode)


KINDS = (Reference(ReferenceKind.EAGER), Reference(ReferenceKind.COMPILE))


@dataclass(frozen=True)
class ReferencePoint:
    """One reference point's speedup over the baseline, or why there is none (a compile failure, in one line)."""

    kind: Reference
    status: str
    speedup: float | None = None  # the baseline's time / the reference's time, from their own A/B run
    ci: tuple[float, float] | None = None
    reason: str = ""
    reference_ms: float | None = None
    baseline_ms: float | None = None
    compile_s: float | None = None  # the check phase, where inductor compiles each new shape (never timed)
    measured_at: str = ""

    @property
    def usable(self) -> bool:
        return self.speedup is not None and self.ci is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "status": self.status,
            "speedup": self.speedup,
            "ci": list(self.ci) if self.ci else None,
            "reason": self.reason,
            "reference_ms": self.reference_ms,
            "baseline_ms": self.baseline_ms,
            "compile_s": self.compile_s,
            "measured_at": self.measured_at,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReferencePoint:
        ci = data.get("ci")
        return cls(
            kind=Reference.of(data["kind"]),
            status=str(data["status"]),
            speedup=data.get("speedup"),
            ci=(float(ci[0]), float(ci[1])) if ci else None,
            reason=str(data.get("reason") or ""),
            reference_ms=data.get("reference_ms"),
            baseline_ms=data.get("baseline_ms"),
            compile_s=data.get("compile_s"),
            measured_at=str(data.get("measured_at") or ""),
        )
