"""One line of the doctor's table: what was looked at, what was found, and the fix where something is missing."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum


class State(str, Enum):
    OK = "ok"
    WEAK = "weak"  # works, with less than the tool can use (a weaker isolation level, /proc accounting)
    MISSING = "missing"  # a part of the tool will not work until fixed
    NOTE = "note"  # information, nothing to fix

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Check:
    area: str
    name: str
    state: State
    found: str
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return {**asdict(self), "state": self.state.value}
