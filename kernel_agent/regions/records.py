"""The captured forward pass as plain records: values (tensors by identity) and the ops between them.

Why records and not an FX graph: the export and the dispatch trace give different graphs (one has `getitem`
nodes and placeholders, the other only tensors seen at dispatch); both become the same list of ops with the
module stack of each, so everything after the capture reads one form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass(frozen=True)
class Ref:
    """A tensor argument of an op: the id of the value it reads."""

    value: int


@dataclass
class Value:
    """One tensor of the forward pass. `source`: input (the recipe's), param, buffer, const (a tensor the model
    holds that is not a parameter), or op (an op's output); `name` is the parameter path or input position."""

    id: int
    shape: tuple[int, ...]
    dtype: str
    source: str
    name: str = ""
    producer: int | None = None
    alias_of: int | None = None  # the value whose memory this one is (a no-op `to`, a view returned as is)


@dataclass
class Op:
    """One aten call: its target (`aten.linear.default`), its arguments with tensors as Refs, the values it
    produced (one per tensor of its flattened result; None where a tuple slot is not a tensor), and the module
    paths it ran inside (outermost first, the root module as "")."""

    index: int
    target: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: list[int | None]
    tuple_out: bool
    modules: list[str]
    classes: list[str]

    def reads(self) -> list[int]:
        found: list[int] = []
        _refs((self.args, self.kwargs), found)
        return found


def _refs(item: Any, found: list[int]) -> None:
    if isinstance(item, Ref):
        found.append(item.value)
    elif isinstance(item, (list, tuple)):
        for x in item:
            _refs(x, found)
    elif isinstance(item, dict):
        for x in item.values():
            _refs(x, found)


@dataclass
class Capture:
    """One shape label's forward pass: how it was captured and why, the ops in execution order, every value,
    the tensors themselves (never written out), and the values the model returned."""

    label: str
    mode: str  # "export" or "trace"
    why: str
    ops: list[Op]
    values: dict[int, Value]
    tensors: dict[int, torch.Tensor] = field(repr=False)
    outputs: list[int]
    user_inputs: list[int]

    def consumers(self) -> dict[int, list[int]]:
        """value id -> the ops that read it, in order."""
        found: dict[int, list[int]] = {}
        for op in self.ops:
            for v in dict.fromkeys(op.reads()):
                found.setdefault(v, []).append(op.index)
        return found


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
