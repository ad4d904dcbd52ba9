"""One declaration per option: its default, help text and command-line name live in one dataclass field.

The command line (`cli/options.py` turns fields into typer options), the run plan stored with each
run (`optimize/config.py`) and the TOML manifest's per-kernel keys all read these fields, so a default
is written once. Choices are enums: `str` subclasses that compare equal to, and store as, their value. A value
that is neither a plain type nor a choice (`Devices`, a comma-separated list) is a class with a `parse`
classmethod, which both the command line and the stored plan go through.

`EvalConfig` lives here, in `core`, because the evaluation (which must not import `optimize`) extends
it into its full option set, `evaluate.pipeline.EvalOptions`.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from dataclasses import MISSING, dataclass, field
from enum import Enum
from pathlib import Path
from types import UnionType
from typing import Any


class Choice(str, Enum):
    """An option's closed set of values; prints, compares and stores as its value (messages written
    for the plain strings, `f"{x!r}"` included, read the same)."""

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)


class ProfileWhen(Choice):
    """When an evaluation runs torch.profiler in the candidate's sandbox after timing (advice, never a verdict)."""

    NEVER = "never"
    FASTER = "faster"  # for verdicts faster or flagged
    ALWAYS = "always"


class Device(Choice):
    AUTO = "auto"  # the problem's device when it is visible here, else the CPU
    CPU = "cpu"
    CUDA = "cuda"


class Devices(tuple):
    """The devices a run evaluates each kernel on (`optimize --device cpu,cuda`): `auto` alone, or one or more of
    cpu and cuda, each once. A tuple of `Device`; stored as the list of their values."""

    NAMES = "auto, cpu, cuda or a comma-separated list of cpu and cuda (cpu,cuda)"
    METAVAR = "<auto|cpu|cuda|cpu,cuda>"

    def __new__(cls, devices: Any = (Device.AUTO,)) -> Devices:
        return super().__new__(cls, devices)

    @classmethod
    def parse(cls, value: Any) -> Devices:
        """'cpu,cuda' (or a list of names, as stored) as Devices; ValueError with one line naming the choices."""
        if isinstance(value, Devices):
            return value
        names = [n.strip() for n in value.split(",")] if isinstance(value, str) else [str(n) for n in value]
        try:
            devices = [Device(n) for n in names]
        except ValueError:
            raise ValueError(f"must be {cls.NAMES}, not {value!r}") from None
        if not devices:
            raise ValueError(f"must be {cls.NAMES}, not an empty list")
        if Device.AUTO in devices and len(devices) > 1:
            raise ValueError(
                f"auto stands alone (it picks one device per kernel); list cpu and cuda instead, not {value!r}"
            )
        repeated = sorted({d.value for d in devices if devices.count(d) > 1})
        if repeated:
            raise ValueError(f"names {', '.join(repeated)} twice in {value!r}; list each device once")
        return cls(devices)

    def __str__(self) -> str:
        return ",".join(d.value for d in self)

    def __repr__(self) -> str:
        return repr(str(self))


class GpuData(Choice):
    """Where a CUDA evaluation's per-call data lives (DESIGN.md section 18): the host path until a GPU run proves
    the device path."""

    HOST = "host"  # inputs drawn on the host, copied to the device in the worker; outputs copied back by it
    DEVICE = "device"  # trusted device buffers shared with the worker through CUDA IPC; compared on the device


class IsolationLevel(Choice):
    AUTO = "auto"  # the strongest one this machine offers
    BWRAP = "bwrap"
    UNSHARE = "unshare"
    PROCESS = "process"


class ExecutorKind(Choice):
    LOCAL = "local"  # this machine's pool
    RAY = "ray"  # a Ray cluster


class SelectorChoice(Choice):
    """Which selector orders the search provider's first configs (select/advice.py)."""

    AUTO = "auto"  # nearest shape when the problem was tuned on this device, else none
    NONE = "none"
    NEAREST = "nearest"
    ANALYTICAL = "analytical"
    LIGHTGBM = "lightgbm"


def option(
    default: Any = MISSING,
    *,
    help: str,
    flag: str | None = None,
    minimum: float | None = None,
    above: float | None = None,
    factory: Any = MISSING,
    choices: str | None = None,
) -> Any:
    """A dataclass field that is a user-facing option: its default, its help, and its flag when not `--field-name`.
    `minimum` is the smallest value accepted; `above` a bound the value must exceed (a timeout of 0 is no timeout);
    `choices` names a registry whose entries are the accepted values (known where it is filled: `backends`)."""
    metadata = {"help": help, "flag": flag, "min": minimum, "above": above, "choices": choices}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def is_option(f: dataclasses.Field) -> bool:
    return "help" in f.metadata


def flag_of(f: dataclasses.Field) -> str:
    """The field's command-line flag (a `--x/--no-x` pair for switches)."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def key_of(f: dataclasses.Field) -> str:
    """The name a user writes for the field outside the command line (a manifest key): the flag without dashes."""
    return flag_of(f).split("/")[0].lstrip("-").replace("-", "_")


def option_leaves(kind: type, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], dataclasses.Field, Any]]:
    """Every option field of a record and of the records it holds, in declaration order, as (the names of the
    records above it, the field, its value type)."""
    hints = typing.get_type_hints(kind)
    for f in dataclasses.fields(kind):
        hint = value_type(hints[f.name])
        if dataclasses.is_dataclass(hint):
            yield from option_leaves(hint, (*path, f.name))
        elif is_option(f):
            yield path, f, hint


def default_of(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not MISSING else f.default


def value_type(hint: Any) -> Any:
    """`X` for `X | None`; the hint itself otherwise."""
    if typing.get_origin(hint) in (typing.Union, UnionType):
        kinds = [a for a in typing.get_args(hint) if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else hint
    return hint


@dataclass
class EvalConfig:
    """What a user chooses about evaluating a candidate; `eval`, `optimize`, `profile` and `export` read these."""

    device: Device = option(
        Device.AUTO, help="Where candidates run: auto (the problem's device when one is visible), cpu or cuda."
    )
    timeout: float = option(180.0, above=0, help="Wall-clock seconds for each sandboxed process.")
    backend: str | None = option(
        None, choices="backends", help="The candidate's backend (detected from the source when omitted)."
    )
    min_gain: float = option(0.02, help="Accept as faster only when the 95% interval's low end clears 1 + MIN_GAIN.")
    sanity_speedup: float = option(
        10.0,
        minimum=1.0,
        help="A speedup above this is flagged for human review (kernel-agent review) instead of accepted.",
    )
    timing_rounds: int = option(
        10, minimum=1, help="Most timing rounds per A/B measurement (alternating baseline and candidate blocks)."
    )
    sequential: bool = option(
        True,
        flag="--sequential/--fixed-rounds",
        help="Stop the A/B timing once a stricter look settles the verdict (after 4 rounds at the least); "
        "--fixed-rounds times every round.",
    )
    resolution: float | None = option(
        None,
        above=0,
        help="Time until the speedup's 95% interval is at most this wide (0.03: 1.5% each side), or the verdict "
        "is settled, or --timing-budget is spent (default: 0.03 on a CPU, 0.01 on a GPU). Also the band within "
        "which a correct candidate reads SAME speed (1 +- resolution).",
    )
    timing_budget: float = option(
        8.0, above=0, help="Seconds of A/B timing per verdict before it stops short of --resolution."
    )
    processes: int = option(
        1,
        minimum=1,
        help="Pairs of processes that time each verdict together. 3 or more measures the between-process effect "
        "from the verdict's own data instead of assuming 8%, and times until --resolution or --timing-budget: "
        "gains of 3-10% on small CPU problems become visible, at about 2.4x the time per verdict (off by default "
        "until that cost comes down; optimize re-times each kernel's best on --record-processes pairs).",
    )
    second_look: int = option(
        3,
        minimum=1,
        help="Pairs of processes that time again, fresh, a correct candidate whose one-pair reading points to a "
        "gain it could not resolve (AMBIGUOUS; a small CPU problem): a 3-10% gain can then be accepted. "
        "1: no second look.",
    )
    isolation: IsolationLevel = option(
        IsolationLevel.AUTO, help="Sandbox isolation: auto (the strongest available), bwrap, unshare or process."
    )
    sandbox_root: Path = option(Path("sandbox"), flag="--sandbox", help="Folder for per-evaluation work dirs.")
    keep_workdir: bool = option(False, flag="--keep/--no-keep", help="Keep the work dir for inspection.")
    threads: int | None = option(
        None,
        minimum=1,
        help="CPU threads for kernels and timing, the same for baseline and candidate (default: all cores).",
    )
    memory_budget: float | None = option(
        None,
        minimum=0.1,
        help=(
            "GB of host memory one evaluation may use; a problem needing more "
            "is refused before it runs (default: what this host has available)."
        ),
    )
    gpu_data: GpuData = option(
        GpuData.HOST,
        help="On a GPU, where timed calls' data lives: host (copied in the worker per call) or device "
        "(trusted device buffers shared through CUDA IPC, compared on the device; not yet proven on a GPU).",
    )
    device_memory_budget: float | None = option(
        None,
        minimum=0.1,
        help="GB of device memory one --gpu-data device evaluation may use; a problem needing more is refused "
        "before it runs (default: the device's free memory).",
    )


@dataclass
class ReferenceConfig:
    """Whether torch's own speed stands beside every speedup (DESIGN.md section 12): torch eager and torch.compile
    of the problem's reference, timed like a candidate and stored once per problem, device fingerprint and torch."""

    references: bool = option(
        True,
        flag="--references/--no-references",
        help="Measure (or reuse the stored) torch eager and torch.compile reference points and show speedups "
        "against them.",
    )
    remeasure_references: bool = option(
        False, flag="--remeasure-references", help="Measure the reference points again and replace the stored ones."
    )
    compile_modes: list[str] = option(
        factory=list,
        flag="--compile-mode",
        help="Another torch.compile mode to measure beside the default one (repeatable): reduce-overhead, "
        "max-autotune or max-autotune-no-cudagraphs; shown as compile:MODE.",
    )


# ---- stored as JSON ----------------------------------------------------------------------------


def to_json(record: Any) -> Any:
    """A config record as JSON values: enums by value, paths as strings, nested records as objects."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {f.name: to_json(getattr(record, f.name)) for f in dataclasses.fields(record)}
    if isinstance(record, Enum):
        return record.value
    if isinstance(record, Path):
        return str(record)
    if isinstance(record, (list, tuple)):
        return [to_json(v) for v in record]
    if isinstance(record, dict):
        return {k: to_json(v) for k, v in record.items()}
    return record


def check_known_fields(kind: type, data: Any, what: str) -> None:
    """Refuse stored JSON that is not an object of `kind`'s fields (a strict decoder's first step)."""
    if not isinstance(data, dict):
        raise ValueError(f"{what} must be a JSON object")
    unknown = set(data) - set(kind.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown {what} field(s): {', '.join(sorted(unknown))}")


def from_json(kind: type, data: dict[str, Any], strict: str = "") -> Any:
    """The record `to_json` wrote, each value turned back into its field's type. Unknown keys are ignored,
    unless `strict` names what is decoded: then unknown keys and values that do not match their field's
    annotation are errors that say so (stored verdicts come back from the database and from Ray workers)."""
    if strict:
        check_known_fields(kind, data, strict)
    hints = typing.get_type_hints(kind)
    values = {}
    for f in dataclasses.fields(kind):
        if f.init and f.name in data:
            if strict and not conforms(hints[f.name], data[f.name]):
                raise TypeError(f"{strict} field {f.name!r} has the wrong type ({type(data[f.name]).__name__})")
            values[f.name] = _typed(hints[f.name], data[f.name])
    return kind(**values)


def conforms(hint: Any, value: Any) -> bool:
    """Whether a JSON value can stand for a field annotated `hint` (plain types, enums by value, optional,
    lists and string-keyed dicts of them; `Any` takes anything)."""
    if hint is Any:
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, UnionType):
        return any(conforms(a, value) for a in args)
    if hint is type(None):
        return value is None
    if origin is list:
        return isinstance(value, list) and all(conforms(args[0], v) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(isinstance(k, str) and conforms(args[1], v) for k, v in value.items())
    if isinstance(hint, type) and issubclass(hint, Enum):
        return value in {m.value for m in hint}
    if dataclasses.is_dataclass(hint):
        fields = typing.get_type_hints(hint)
        return isinstance(value, dict) and all(k in fields and conforms(fields[k], v) for k, v in value.items())
    if hint is bool:
        return isinstance(value, bool)
    if hint in (int, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(hint, type) and isinstance(value, hint)


def _typed(hint: Any, value: Any) -> Any:
    kind = value_type(hint)
    if value is None:
        return None
    if typing.get_origin(kind) is list and value and dataclasses.is_dataclass(typing.get_args(kind)[0]):
        return [from_json(typing.get_args(kind)[0], v) for v in value]
    if dataclasses.is_dataclass(kind):
        return from_json(kind, value)
    if isinstance(kind, type) and issubclass(kind, (Enum, Path)):
        return kind(value)
    if isinstance(kind, type) and hasattr(kind, "parse"):
        return kind.parse(value)
    return value
