"""The verdict of one evaluation: what `eval --json` prints and the database stores.

Much of a verdict comes from the candidate (exception messages, its output, worker
replies), so every string in it is `text.clean`ed here, the one place every verdict
passes through: on every assignment of a text field, and for the lists and dicts
(flags, checks, static findings, profile) in `__post_init__` and again in `to_dict`, which
is what `eval --json`, the database and the Ray executor read. The timing is a typed record
(`core/timing_result.py`): written to JSON in `to_dict` (its strings cleaned there) and read
back once in `from_dict`.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from enum import Enum
from typing import Any

from kernel_agent.core.config import from_json
from kernel_agent.core.text import clean, clean_nested
from kernel_agent.core.timing_result import TimingResult, stored_timing


class Status(str, Enum):
    """Every verdict's status. A `str` subclass: it compares equal to, and stores as, its value."""

    FASTER = "faster"  # correct, and the interval's low end clears 1 + min_gain
    CORRECT = "correct"  # correct, not (verifiably) faster
    FLAGGED = (
        "flagged"  # correct and measured faster, but something needs a human (sanity bound, roofline floor, clocks)
    )
    INCORRECT = "incorrect"  # an output, its shape, dtype or device, or an input it changed failed the checks
    COMPILE_ERROR = "compile_error"  # it does not parse, import or build, or defines no entry point
    RUNTIME_ERROR = "runtime_error"  # it raised while called (or the baseline failed beside it)
    TIMEOUT = "timeout"  # a sandboxed process ran past --timeout
    CRASHED = "crashed"  # the worker died: a signal, exit(), out of memory, disk quota, a lost Ray worker
    REJECTED = "rejected"  # broke a harness rule, or the problem cannot be evaluated here

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)


STATUSES = tuple(s.value for s in Status)
PASSING = (Status.FASTER.value, Status.CORRECT.value, Status.FLAGGED.value)


class RefusalKind(str, Enum):
    """Why an evaluation was refused before it could judge the candidate (the loop reads the kind)."""

    TOO_LARGE = "too_large"  # the problem's working set cannot fit this machine's (or device's) memory
    UNSIZABLE = "unsizable"  # its working set cannot even be sized
    BUSY = "busy"  # others took too much of the timing cores: no number would mean anything

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Refusal:
    """A refusal with its numbers: what the evaluation needed, what there was, of which memory."""

    kind: RefusalKind
    needed_bytes: int | None = None
    available_bytes: int | None = None
    memory: str = ""  # "host" or "device" (too_large)
    share: float | None = None  # the share of the timing cores others took (busy)


class StatusError(Exception):
    """Ends an evaluation (or one stage of it) with a verdict status and a one-line reason."""

    def __init__(self, status: Status, reason: str, refusal: Refusal | None = None) -> None:
        super().__init__(reason)
        self.status = Status(status)  # a worker's reply names its status as text: checked against the type here
        self.reason = reason
        self.refusal = refusal


# Text fields cleaned on every assignment: (length limit, keep newlines).
_TEXT_FIELDS = {
    "reason": (1000, False),
    "candidate_output": (4000, True),
    "problem": (200, False),
    "backend": (40, False),
    "device": (40, False),
    "isolation": (1000, False),
}
_NESTED_FIELDS = ("flags", "checks", "static", "profile")
FOLLOWS_STATUS = ("correct",)  # fields set from the status alone


@dataclass
class Verdict:
    status: Status
    reason: str = ""
    correct: bool = False  # always `status in PASSING` (set with the status; kept in the stored JSON)
    speedup: float | None = None
    speedup_ci: list[float] | None = None
    problem: str = ""
    backend: str = ""
    device: str = ""
    isolation: str = ""
    interpreted: bool = False
    flags: list[str] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    timing: TimingResult | None = None
    static: list[dict[str, Any]] = field(default_factory=list)
    tolerances: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    candidate_output: str = ""
    profile: dict[str, Any] | None = (
        None  # torch.profiler breakdown the candidate's process reported (advice, sanitized)
    )
    roofline: dict[str, Any] | None = (
        None  # work counts, ceilings and floors per benchmark shape (set by the evaluation when ceilings are known)
    )
    accounting: dict[str, Any] | None = (
        None  # CPU time per phase of each side's sandbox, read from outside its processes
    )
    refusal: Refusal | None = None  # set when the evaluation was refused before judging (kind and numbers)

    @property
    def elapsed(self) -> float:
        """Seconds the evaluation itself took (the sum of its phases), without any wait for a free worker."""
        return sum(self.durations.values())

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _TEXT_FIELDS and isinstance(value, str):
            limit, keep_newlines = _TEXT_FIELDS[name]
            value = clean(value, limit, keep_newlines=keep_newlines)
        if name == "status":
            value = _status(value)
        if name in FOLLOWS_STATUS and "status" in self.__dict__:
            value = self.status in PASSING  # the two never disagree (an audit failing after the checks passed)
        object.__setattr__(self, name, value)
        if name == "status":
            object.__setattr__(self, "correct", value in PASSING)

    def __post_init__(self) -> None:
        if self.speedup_ci is not None and len(self.speedup_ci) != 2:
            raise TypeError("verdict field 'speedup_ci' must be an interval of two ends")
        object.__setattr__(self, "correct", self.status in PASSING)
        self.sanitize()

    def sanitize(self) -> Verdict:
        """Clean every string in the lists and dicts (items appended after construction included)."""
        for name in _NESTED_FIELDS:
            clean_nested(getattr(self, name))
        return self

    @property
    def passed(self) -> bool:
        return self.status in PASSING

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON values: what `eval --json` prints and the database stores."""
        self.sanitize()
        data = {f.name: _plain(getattr(self, f.name)) for f in fields(self)}
        data["timing"] = clean_nested(self.timing.to_json()) if self.timing is not None else None
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=_json_default)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """Decode a stored verdict strictly: unknown keys and wrong types are errors."""
        if isinstance(data, dict) and "status" not in data:
            raise ValueError("verdict has no status")
        if isinstance(data, dict) and isinstance(data["status"], str):
            _status(data["status"])  # an unknown status says so, not just "wrong type"
        timing = _timing(data.get("timing")) if isinstance(data, dict) else None
        verdict = from_json(cls, {**data, "timing": None} if timing is not None else data, strict="verdict")
        verdict.timing = timing
        return verdict


def _status(value: Any) -> Status:
    try:
        return Status(value)
    except ValueError:
        raise ValueError(f"unknown verdict status {value!r}") from None


def _timing(stored: Any) -> TimingResult | None:
    """A stored verdict's timing record, typed (its JSON reads back to the same bytes)."""
    if stored is None:
        return None
    try:
        return stored_timing(stored)
    except (ValueError, TypeError) as exc:
        raise TypeError(f"verdict field 'timing' has the wrong type: {exc}") from None


def _plain(value: Any) -> Any:
    """A field's value as `asdict` gives it: records as dicts, containers copied."""
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else copy.deepcopy(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, float):
        return value
    return str(value)
