"""The backend interface and the records it produces."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from kernel_agent.backends import checks


@dataclass
class StaticFinding:
    """A static-check result: `hard` findings reject the candidate before it runs."""

    rule: str
    message: str
    hard: bool
    line: int | None = None


@dataclass
class Prepared:
    """What the sandbox needs to run a candidate of this backend."""

    env: dict[str, str] = field(default_factory=dict)
    extra_ro: tuple[Path, ...] = ()
    interpreted: bool = False  # Triton under TRITON_INTERPRET=1: correctness only, never timed


class BuildFailed(Exception):
    """Compilation on the trusted side failed; the message holds compiler output."""


class Backend:
    """One kind of kernel source. Subclasses say what construct is required and how to run it."""

    name = "base"

    def required_construct(self, tree: ast.Module) -> str | None:
        """A reason when the backend's kernel construct is missing, else None."""
        return None

    def lint(self, tree: ast.Module, source: str) -> list[StaticFinding]:
        findings = checks.common_findings(tree, allow_ctypes=self.allows_ctypes)
        missing = self.required_construct(tree)
        if missing:
            findings.append(StaticFinding("missing-construct", missing, hard=True))
        return findings

    allows_ctypes = False

    def prepare(self, source: str, device: str, workdir: Path, build: BuildContext) -> Prepared:
        return Prepared()


@dataclass
class BuildContext:
    """Where trusted builds go and how to isolate the compiler."""

    store: Path
    isolation: object
    sandbox_root: Path
    timeout: float = 120.0
