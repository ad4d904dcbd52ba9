"""Typed records to JSON and back, key for key: a record read from storage writes back the bytes it was read from.

Stored verdicts span versions of the writer: an old one lacks keys a newer writer adds, and holds keys a newer
reader no longer knows. Decoding fills a missing key from its field's `absent` value and keeps an unknown key as
JSON text (`Kept`); a record remembers its stored keys (`layout`) where they differ from what this version writes,
so that encoding gives back exactly what was read, and no migration is ever needed to read an old verdict.

Field metadata (`meta`) says what a plain field cannot: the JSON key where it is not the field's name, a field
written only when set, a float written as null when it is not finite, a tuple of records stored as an object keyed
by each one's name, and what a record older than the field decodes to.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import MISSING, dataclass, field
from types import UnionType
from typing import Any, TypeVar

R = TypeVar("R", bound="JsonRecord")
_OWN = ("layout", "kept")  # the codec's own fields, never written as keys


def meta(
    key: str = "", optional: bool = False, finite: bool = False, named: str = "", absent: Any = MISSING
) -> dict[str, Any]:
    """A field's codec metadata: `key` (its JSON key), `optional` (written only when not None), `finite` (an
    infinite or NaN float is written as null and read back as inf), `named` (a tuple of records stored as an
    object keyed by this field of each), `absent` (the value of a stored record that predates the field)."""
    found = {"key": key, "optional": optional, "finite": finite, "named": named}
    if absent is not MISSING:
        found["absent"] = absent
    return found


@dataclass(frozen=True)
class Kept:
    """A stored key this version does not read, with its value's JSON text: written back as it was."""

    key: str
    text: str


@dataclass(frozen=True)
class JsonRecord:
    """A frozen record that writes itself as a JSON object (`to_json`) and reads itself back (`from_json`)."""

    layout: tuple[str, ...] | None = field(default=None, kw_only=True, compare=False, repr=False)
    kept: tuple[Kept, ...] = field(default=(), kw_only=True, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return encode(self)

    @classmethod
    def from_json(cls: type[R], data: Any) -> R:
        return decode(cls, data)


def _key(f: dataclasses.Field) -> str:
    return f.metadata.get("key") or f.name


def _fields(kind: Any) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(kind) if f.name not in _OWN]


def encode(record: JsonRecord) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in _fields(record):
        value = getattr(record, f.name)
        if value is None and f.metadata.get("optional"):
            continue
        out[_key(f)] = _out(value, f.metadata)
    for kept in record.kept:
        out[kept.key] = json.loads(kept.text)
    if record.layout is not None:
        out = {k: out[k] for k in record.layout if k in out}
    return out


def _out(value: Any, metadata: typing.Mapping[str, Any]) -> Any:
    if metadata.get("finite") and isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, JsonRecord):
        return value.to_json()
    if isinstance(value, (tuple, list)) and metadata.get("named"):
        name = metadata["named"]
        return {getattr(v, name): {k: x for k, x in v.to_json().items() if k != name} for v in value}
    if isinstance(value, (tuple, list)):
        return [_out(v, {}) for v in value]
    return value


def decode(kind: type[R], data: Any, what: str = "") -> R:
    """The record `encode` wrote (or an older writer did); a wrong type or a missing key raises ValueError."""
    what = what or kind.__name__
    if not isinstance(data, dict):
        raise ValueError(f"{what} is not a JSON object")
    hints = typing.get_type_hints(kind)
    values: dict[str, Any] = {}
    known = set()
    for f in _fields(kind):
        key = _key(f)
        known.add(key)
        if key in data:
            values[f.name] = _in(hints[f.name], data[key], f.metadata, f"{what}.{key}")
        elif "absent" in f.metadata:
            values[f.name] = f.metadata["absent"]
        elif f.default is MISSING and f.default_factory is MISSING:
            raise ValueError(f"{what} has no {key!r}")
    kept = tuple(Kept(k, json.dumps(v)) for k, v in data.items() if k not in known)
    record = kind(**values, kept=kept)
    if list(encode(record)) != list(data):  # keys missing, or in another order: an older writer's
        record = dataclasses.replace(record, layout=tuple(data))
    return record


def _in(hint: Any, value: Any, metadata: typing.Mapping[str, Any], what: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, UnionType):
        if value is None:
            return math.inf if metadata.get("finite") else None
        (hint,) = [a for a in args if a is not type(None)]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if value is None and metadata.get("finite"):
        return math.inf
    if dataclasses.is_dataclass(hint):
        return hint.from_json(value) if issubclass(hint, JsonRecord) else decode(hint, value, what)
    if origin in (tuple, list) and metadata.get("named"):
        if not isinstance(value, dict):
            raise ValueError(f"{what} is not a JSON object")
        return origin(args[0].from_json({metadata["named"]: k, **v}) for k, v in value.items())
    if origin in (tuple, list):
        if not isinstance(value, list):
            raise ValueError(f"{what} is not a list")
        if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
            if len(value) != len(args):
                raise ValueError(f"{what} does not hold {len(args)} values")
            return tuple(_in(a, v, {}, what) for a, v in zip(args, value))
        return origin(_in(args[0], v, {}, what) for v in value)
    if hint in (int, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and (hint is float or isinstance(value, int))
    else:
        ok = isinstance(value, hint)
    if not ok:
        raise ValueError(f"{what} has the wrong type ({type(value).__name__})")
    return value
