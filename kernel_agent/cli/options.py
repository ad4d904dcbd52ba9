"""Command-line options built from the config records, and the few options that belong to the CLI alone.

A command names a config record as a parameter (`evaluation: EvalConfig = fields_of(only=...)`);
`from_config` replaces it with one typer option per field of the record (nested records included),
each with the field's default, help, flag and minimum, and hands the command the record built from
what was typed. So a default is written once, in its field, and `--help` shows it once.
"""

from __future__ import annotations

import atexit
import dataclasses
import inspect
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import typer

from kernel_agent.core.config import default_of, flag_of, option_leaves, value_type

DB = typer.Option(
    None, "--db", help="Database file or SQLAlchemy URL (default: $KERNEL_AGENT_DB or ./runs.db).", show_default=False
)


def json_option(what: str = "one JSON document") -> Any:
    return typer.Option(False, "--json", help=f"Print {what} on stdout.")


JSON = json_option()


@dataclass(frozen=True)
class FieldsOf:
    """A parameter's default that stands for its config record: which fields become options."""

    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()

    def wants(self, name: str) -> bool:
        return (not self.only or name in self.only) and name not in self.skip


def fields_of(**wanted: tuple[str, ...]) -> Any:
    """`only=(...)` or `skip=(...)`: typed as Any so that it can stand as a record parameter's default."""
    return FieldsOf(**wanted)


GIVEN: Any = object()  # the default of a `given: frozenset[str]` parameter: the options typed on the command line


@dataclass(frozen=True)
class Leaf:
    """One option field somewhere in a record tree: `path` is the names of the records above it."""

    path: tuple[str, ...]
    field: dataclasses.Field
    hint: Any

    @property
    def name(self) -> str:
        return self.field.name


def leaves(kind: type, wanted: FieldsOf, path: tuple[str, ...]) -> Iterator[Leaf]:
    """The option fields of a record and of the records it holds, in declaration order."""
    for where, f, hint in option_leaves(kind, path):
        if wanted.wants(f.name):
            yield Leaf(where, f, hint)


def typer_option(leaf: Leaf) -> Any:
    """The typer option of one field: its default, flag, help and minimum; a choice parsed into its enum."""
    meta = leaf.field.metadata
    extra: dict[str, Any] = {}
    if isinstance(leaf.hint, type) and issubclass(leaf.hint, Enum):
        extra = {"parser": choice_parser(leaf.hint), "metavar": "<" + "|".join(m.value for m in leaf.hint) + ">"}
    elif isinstance(leaf.hint, type) and hasattr(leaf.hint, "parse"):  # a value of its own syntax (core.config.Devices)
        extra = {"parser": value_parser(leaf.hint.parse), "metavar": getattr(leaf.hint, "METAVAR", "TEXT")}
    if meta.get("choices") is not None:
        accepted = REGISTRIES[meta["choices"]]()
        extra = {"parser": value_parser(one_of(accepted)), "metavar": "<" + "|".join(accepted) + ">"}
    if meta.get("min") is not None:
        extra["min"] = meta["min"]
    text = meta["help"]
    if meta.get("above") is not None:  # click's ranges are inclusive here: the bound is checked by the parser
        extra = {"parser": value_parser(above_parser(leaf.hint, meta["above"])), "metavar": f"<{leaf.hint.__name__}>"}
        text += f"  [x>{meta['above']:g}]"
    return typer.Option(default_of(leaf.field), flag_of(leaf.field), help=text, **extra)


def registered_backends() -> tuple[str, ...]:
    from kernel_agent.evaluate.backends import names

    return names()


REGISTRIES: dict[str, Callable[[], tuple[str, ...]]] = {"backends": registered_backends}


def must_be(accepted: list[str] | tuple[str, ...], value: Any) -> str:
    return f"must be {', '.join(accepted[:-1])} or {accepted[-1]}, not {value!r}"


def one_of(accepted: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in accepted:
            raise ValueError(must_be(accepted, value))
        return value

    return parse


def above_parser(kind: type, bound: float) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        try:
            number = kind(value)
        except (TypeError, ValueError):
            raise ValueError(f"{value!r} is not a {kind.__name__}") from None
        if not number > bound:
            raise ValueError(f"must be greater than {bound:g}, not {value}")
        return number

    return parse


def choice_parser(kind: type[Enum]) -> Callable[[Any], Enum]:
    def parse(value: Any) -> Enum:
        if isinstance(value, kind):
            return value
        try:
            return kind(value)
        except ValueError:
            raise typer.BadParameter(must_be([m.value for m in kind], value)) from None

    return parse


def value_parser(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`parse` with its ValueError as a usage error (exit 2, one line naming what is accepted)."""

    def parsed(value: Any) -> Any:
        try:
            return parse(value)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None

    return parsed


def build(kind: type, values: dict[tuple[str, ...], Any], path: tuple[str, ...]) -> Any:
    """The record of `kind` with the typed values (keyed by field path); fields not offered keep their defaults."""
    hints = typing.get_type_hints(kind)
    given: dict[str, Any] = {}
    for f in dataclasses.fields(kind):
        hint = value_type(hints[f.name])
        if dataclasses.is_dataclass(hint):
            given[f.name] = build(hint, values, (*path, f.name))
        elif (*path, f.name) in values:
            given[f.name] = values[(*path, f.name)]
    return kind(**given)


def from_config(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command` with each config-record parameter expanded into typer options (see the module docstring)."""
    hints = typing.get_type_hints(command)
    parameters: list[inspect.Parameter] = []
    records: dict[str, tuple[type, list[Leaf]]] = {}
    given_name = None
    for p in inspect.signature(command).parameters.values():
        if isinstance(p.default, FieldsOf):
            found = list(leaves(hints[p.name], p.default, ()))
            records[p.name] = (hints[p.name], found)
            parameters += [
                inspect.Parameter(leaf.name, p.KEYWORD_ONLY, default=typer_option(leaf), annotation=leaf.hint)
                for leaf in found
            ]
        elif p.default is GIVEN:
            given_name = p.name
        else:
            parameters.append(p.replace(kind=p.KEYWORD_ONLY, annotation=hints.get(p.name, p.annotation)))
    names = [p.name for p in parameters]
    assert len(names) == len(set(names)), f"{command.__name__}: two options share a name"
    expanded = {leaf.name for _, found in records.values() for leaf in found}
    parameters.append(inspect.Parameter("typer_context", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context))

    def run(**values: Any) -> Any:
        context = values.pop("typer_context")
        arguments = {name: value for name, value in values.items() if name not in expanded}
        for name, (kind, found) in records.items():
            arguments[name] = build(kind, {(*leaf.path, leaf.name): values[leaf.name] for leaf in found}, ())
        if given_name is not None:
            arguments[given_name] = frozenset(n for n in names if context.get_parameter_source(n).name != "DEFAULT")
        return command(**arguments)

    run.__name__, run.__qualname__, run.__doc__, run.__module__ = (
        command.__name__,
        command.__qualname__,
        command.__doc__,
        command.__module__,
    )
    run.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run


def open_db(db: str | None):
    """Open and migrate the database, or exit 2 with one line; closed (checkpointed) when the command ends."""
    from kernel_agent.cli.common import fail
    from kernel_agent.db.session import DatabaseError, open_database

    try:
        database = open_database(db)
    except DatabaseError as exc:
        fail(str(exc))
    atexit.register(database.close)  # the CLI's main runs exit handlers on return and on sys.exit alike
    return database
