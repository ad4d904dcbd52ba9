"""What the trusted side and the worker say to each other: one small record per request, the descriptors a
worker is handed, the statuses it may report, and the error a kernel call raises.

The two sides share this module, `channel.py` (the JSON lines), `tensors.py` (how a tensor is named) and
the device path's transport (`device/transport.py`, `device/cuda_ipc.py`), and nothing else of each
other: the host never imports the code that runs beside the candidate, and that code never imports the
host's. On the wire each request is one JSON line, `{"cmd": NAME, ...fields}`; `to_wire` and `parse` are
the only places that spell that shape. The worker reads every line through `parse`, which holds each field
to its declared type: a line that is not one of these requests gets a one-line reason back, never a
traceback.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import astuple, dataclass, field, fields
from typing import Any, ClassVar

from kernel_agent.core.verdict import Status
from kernel_agent.sandbox.lifeline import die_with_parent  # noqa: F401 - both sides set it; shared here

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
    poison_value: float = math.nan
    placed: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Warmup(Request):
    """Calls until both minimums are met, or the maximum time has passed."""

    CMD: ClassVar[str] = "warmup"
    min_calls: int = 10
    min_seconds: float = 0.025
    max_seconds: float = 30.0
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
    calls: int = 3
    placed: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Exit(Request):
    CMD: ClassVar[str] = "exit"


REQUESTS: dict[str, type[Request]] = {
    cls.CMD: cls for cls in (Load, Check, Warmup, Stage, Call, Describe, Ping, Profile, Exit)
}
PLACEMENT = ("layout",)  # the fields `WorkerSession.place` writes: where a call's inputs are in the segment


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# What a field's declared type admits on the wire (JSON has no tuples: lists stand for them).
ADMITS: dict[str, Callable[[object], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": _number,
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "list[Any]": lambda v: isinstance(v, list),
    "dict[str, Any] | None": lambda v: v is None or isinstance(v, dict),
    "Any": lambda v: True,
}


class ProtocolError(ValueError):
    """A message that is not one of the requests above (one-line reason)."""


def parse(message: object) -> Request:
    """The worker's reading of one line: the request it names, its fields held to their declared types, the
    placement apart (a request that places inputs must say where they are)."""
    name = message.get("cmd") if isinstance(message, dict) else None
    cls = REQUESTS.get(name) if isinstance(name, str) else None
    if cls is None or not isinstance(message, dict):
        raise ProtocolError(f"unknown request {str(message)[:80]!r}")
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name == "placed":
            if not all(isinstance(message.get(k), list) for k in PLACEMENT):
                raise ProtocolError(f"{cls.CMD}: no layout of its inputs")
            kwargs["placed"] = {k: message[k] for k in PLACEMENT}
        elif f.name in message:
            if not ADMITS[str(f.type)](message[f.name]):
                raise ProtocolError(f"{cls.CMD}: {f.name} is not {f.type}: {str(message[f.name])[:40]!r}")
            kwargs[f.name] = message[f.name]
    return cls(**kwargs)


@dataclass(frozen=True)
class WorkerFds:
    """The descriptors a worker is handed, and the numbers it finds them at (`--fds` on its command line)."""

    requests: int  # the worker reads requests here
    replies: int  # and writes replies here
    inputs: int  # the sealed input segment
    state: int = -1  # a KernelBench module's weights, when it has any

    def arg(self) -> str:
        return ",".join(str(fd) for fd in astuple(self))

    @classmethod
    def parse(cls, text: str) -> WorkerFds:
        return cls(*(int(part) for part in text.split(",")))

    def passed(self) -> tuple[int, ...]:
        return tuple(fd for fd in astuple(self) if fd >= 0)


class CallError(Exception):
    """A kernel call that failed with a status the worker may report, and a one-line reason."""

    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
