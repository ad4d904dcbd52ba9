"""What the trusted side and the worker say to each other: one small record per request, the statuses a
worker may report, and the error a kernel call raises.

Both sides import this module and nothing else of each other: the host never imports the code that runs
beside the candidate. On the wire each request is one JSON line, `{"cmd": NAME, ...fields}`; `to_wire` and
`parse` are the only places that spell that shape.
"""

from __future__ import annotations

import ctypes
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar

from kernel_agent.core.verdict import Status

WORKER_STATUSES = (Status.COMPILE_ERROR, Status.RUNTIME_ERROR, Status.CRASHED, Status.REJECTED, Status.INCORRECT)


@dataclass(frozen=True)
class Request:
    """One request; `placed` carries the fields that name a call's inputs in the sealed segment."""

    CMD: ClassVar[str] = ""

    def to_wire(self) -> dict[str, Any]:
        body = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "placed"}
        return {"cmd": self.CMD, **body, **getattr(self, "placed", {})}


@dataclass(frozen=True)
class Load(Request):
    """Import the kernel; `state` names a KernelBench model's sealed weights and init arguments."""

    CMD: ClassVar[str] = "load"
    state: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"cmd": self.CMD} if self.state is None else {"cmd": self.CMD, "state": self.state}


@dataclass(frozen=True)
class Check(Request):
    """One check call, the allocator's free memory poisoned first."""

    CMD: ClassVar[str] = "check"
    poison_bytes: int = 0
    poison_value: float = 0.0
    placed: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Warmup(Request):
    CMD: ClassVar[str] = "warmup"
    min_calls: int = 1
    min_seconds: float = 0.0
    max_seconds: float = 0.0
    placed: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Stage(Request):
    """The views of a request's layout of timed calls, made once per layout; `handles` on the device path."""

    CMD: ClassVar[str] = "stage"
    key: str = ""
    calls: list[Any] = field(default_factory=list)
    handles: Any = None

    def to_wire(self) -> dict[str, Any]:
        wire = {"cmd": self.CMD, "key": self.key, "calls": self.calls}
        return wire if self.handles is None else {**wire, "handles": self.handles}


@dataclass(frozen=True)
class Call(Request):
    """The timed calls of a staged layout."""

    CMD: ClassVar[str] = "call"
    key: str = ""


@dataclass(frozen=True)
class Describe(Request):
    """Where the last timed calls left their outputs (and inputs, for the audits)."""

    CMD: ClassVar[str] = "describe"
    integrity: bool = False


@dataclass(frozen=True)
class Ping(Request):
    CMD: ClassVar[str] = "ping"


@dataclass(frozen=True)
class Profile(Request):
    """The candidate's own operator breakdown (reported, never trusted)."""

    CMD: ClassVar[str] = "profile"
    calls: int = 1
    placed: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Exit(Request):
    CMD: ClassVar[str] = "exit"


REQUESTS: dict[str, type[Request]] = {
    cls.CMD: cls for cls in (Load, Check, Warmup, Stage, Call, Describe, Ping, Profile, Exit)
}
PLACEMENT = ("layout",)  # the fields `WorkerSession.place` writes


class ProtocolError(ValueError):
    """A message that is not one of the requests above."""


def parse(message: dict[str, Any]) -> Request:
    """The worker's reading of one line: the request it names, its known fields, the placement apart."""
    cls = REQUESTS.get(message.get("cmd")) if isinstance(message, dict) else None
    if cls is None:
        raise ProtocolError(f"unknown request {str(message)[:80]!r}")
    names = {f.name for f in fields(cls)}
    kwargs = {k: v for k, v in message.items() if k in names and k != "placed"}
    if "placed" in names:
        kwargs["placed"] = {k: message[k] for k in PLACEMENT if k in message}
    return cls(**kwargs)


def as_dict(request: Request) -> dict[str, Any]:
    return asdict(request)


class CallError(Exception):
    """A kernel call that failed with a status the worker may report, and a one-line reason."""

    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


try:  # looked up at import: after a fork in a threaded parent, dlopen's locks may be held
    _PRCTL = ctypes.CDLL(None).prctl
except (OSError, AttributeError):
    _PRCTL = None


def die_with_parent() -> None:
    """SIGKILL this process when the thread that started it dies (PR_SET_PDEATHSIG): an orchestrator
    killed by `timeout` or the OOM killer leaves no sandbox behind holding the GPU and the uid's process
    slots. A change of uid clears it, so the worker sets it again after setpriv."""
    if _PRCTL is not None:
        _PRCTL(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
