"""The backend interface and the records it produces."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from kernel_agent.evaluate.backends import lint as checks
from kernel_agent.evaluate.backends.build_store import DEFAULT_LIBRARY_BYTES, quota_from_env
from kernel_agent.evaluate.backends.lint import StaticFinding
from kernel_agent.sandbox.deadline import Deadline


@dataclass
class Prepared:
    """What the sandbox needs to run a candidate of this backend."""

    env: dict[str, str] = field(default_factory=dict)
    extra_ro: tuple[Path, ...] = ()
    interpreted: bool = False  # Triton under TRITON_INTERPRET=1: correctness only, never timed
    build_store: str | None = None  # the folder holding the trusted build's library (told to the worker, not env)


class BuildFailed(Exception):
    """Compilation on the trusted side failed; the message holds compiler output."""


class Backend:
    """One kind of kernel source, declared in one place: its name (the `--backend` choice), the label and
    rules the prompt states, the packages an exported kernel of it requires, the devices it runs on, how its
    source is recognized, the construct it requires and how to prepare it to run."""

    name = "base"
    label = "base"
    prompt_rules: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()  # pip requirements of an exported package that ships a kernel of it
    devices: tuple[str, ...] = ("cpu", "cuda")

    def detects(self, source: str) -> bool:
        """Whether the source shows this backend's construct (detection tries backends in registration order)."""
        return False

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
    """Where trusted builds go, how to isolate the compiler, and how far it may go.

    A source can keep gcc busy at compile time or make a multi-gigabyte library, so a build runs
    under rlimits and never past its side's `deadline` (what is left of the evaluation's timeout)
    nor `timeout` seconds. `limits` are the evaluation's (kernel_agent.sandbox.host.isolation
    .Limits); the compiler gets the tighter of them and the caps here."""

    store: Path
    isolation: object
    sandbox_root: Path
    timeout: float = 60.0  # wall clock for one build, whatever the deadline
    deadline: Deadline | None = None
    limits: object | None = None
    cpu_seconds: int = 30  # per compiler process (cc1plus, as, ld); honest kernels take about 0.2 s
    library_bytes: int = DEFAULT_LIBRARY_BYTES  # RLIMIT_FSIZE for the compiler: caps the library
    memory_bytes: int = 4 << 30  # RLIMIT_DATA for the compiler
    quota_bytes: int = field(default_factory=quota_from_env)  # the whole store, kept by LRU eviction

    def seconds_left(self) -> float:
        """Wall-clock seconds a build may still take."""
        return self.timeout if self.deadline is None else min(self.timeout, self.deadline.left())
