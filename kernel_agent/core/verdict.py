"""The verdict of one evaluation: what `eval --json` prints and the database stores.

Much of a verdict comes from the candidate (exception messages, its output, worker
replies), so every string in it is `text.clean`ed here, the one place every verdict
passes through: on every assignment of a text field, and for the lists and dicts
(flags, checks, static findings, timing, profile) in `__post_init__` and again in
`to_dict`, which is what `eval --json`, the database and the Ray executor read.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from kernel_agent.core.config import check_known_fields
from kernel_agent.core.text import clean, clean_nested


class Status(str, Enum):
    """Every verdict's status. A `str` subclass: it compares equal to, and stores as, its value."""

    FASTER = "faster"  # correct, and the interval's low end clears 1 + min_gain
    CORRECT = "correct"  # correct, not (verifiably) faster
    FLAGGED = (
        "flagged"  # correct and measured faster, but something needs a human (sanity bound, roofline floor, clocks)
    )
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    REJECTED = "rejected"  # broke a harness rule, or the problem cannot be evaluated here

    def __str__(self) -> str:
        return self.value


STATUSES = tuple(s.value for s in Status)
PASSING = (Status.FASTER.value, Status.CORRECT.value, Status.FLAGGED.value)


class StatusError(Exception):
    """Ends an evaluation (or one stage of it) with a verdict status and a one-line reason."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = Status(status).value
        self.reason = reason


# Text fields cleaned on every assignment: (length limit, keep newlines).
_TEXT_FIELDS = {
    "reason": (1000, False),
    "candidate_output": (4000, True),
    "problem": (200, False),
    "backend": (40, False),
    "device": (40, False),
    "isolation": (1000, False),
}
_NESTED_FIELDS = ("flags", "checks", "static", "timing", "profile")


@dataclass
class Verdict:
    status: str
    reason: str = ""
    correct: bool = False
    speedup: float | None = None
    speedup_ci: list[float] | None = None
    problem: str = ""
    backend: str = ""
    device: str = ""
    isolation: str = ""
    interpreted: bool = False
    flags: list[str] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    timing: dict[str, Any] | None = None
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

    @property
    def elapsed(self) -> float:
        """Seconds the evaluation itself took (the sum of its phases), without any wait for a free worker."""
        return sum(self.durations.values())

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _TEXT_FIELDS and isinstance(value, str):
            limit, keep_newlines = _TEXT_FIELDS[name]
            value = clean(value, limit, keep_newlines=keep_newlines)
        object.__setattr__(self, name, value)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}")
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
        return asdict(self.sanitize())

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=_json_default)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """Decode a stored verdict strictly: unknown keys and wrong types are errors."""
        check_known_fields(cls, data, "verdict")
        if not isinstance(data.get("status"), str):
            raise ValueError("verdict has no status")
        for name, value in data.items():
            if not _FIELD_CHECKS[name](value):
                raise TypeError(f"verdict field {name!r} has the wrong type ({type(value).__name__})")
        return cls(**data)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _opt_interval(value: Any) -> bool:
    return value is None or (isinstance(value, list) and len(value) == 2 and all(_number(v) for v in value))


def _dict_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, dict) for v in value)


_FIELD_CHECKS: dict[str, Any] = {
    "status": lambda v: isinstance(v, str),
    "reason": lambda v: isinstance(v, str),
    "correct": lambda v: isinstance(v, bool),
    "speedup": lambda v: v is None or _number(v),
    "speedup_ci": _opt_interval,
    "problem": lambda v: isinstance(v, str),
    "backend": lambda v: isinstance(v, str),
    "device": lambda v: isinstance(v, str),
    "isolation": lambda v: isinstance(v, str),
    "interpreted": lambda v: isinstance(v, bool),
    "flags": lambda v: isinstance(v, list) and all(isinstance(f, str) for f in v),
    "checks": _dict_list,
    "timing": lambda v: v is None or isinstance(v, dict),
    "static": _dict_list,
    "tolerances": lambda v: isinstance(v, dict),
    "environment": lambda v: isinstance(v, dict),
    "durations": lambda v: isinstance(v, dict) and all(_number(d) for d in v.values()),
    "candidate_output": lambda v: isinstance(v, str),
    "profile": lambda v: v is None or isinstance(v, dict),
    "roofline": lambda v: v is None or isinstance(v, dict),
    "accounting": lambda v: v is None or isinstance(v, dict),
}


def _json_default(value: Any) -> Any:
    if isinstance(value, float):
        return value
    return str(value)
