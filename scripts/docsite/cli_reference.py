"""The command reference, read from the typer app itself: every command, argument and option as `--help`
prints it, so the page cannot fall behind the code (a new command or option appears at the next build)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from docsite.markdown import code, prose

PROGRAM = "kernel-agent"


@dataclass(frozen=True)
class Command:
    """One command of the app: its words after the program name, and the typer (click) command."""

    path: tuple[str, ...]
    command: Any

    @property
    def name(self) -> str:
        return " ".join((PROGRAM, *self.path))

    @property
    def is_group(self) -> bool:
        return hasattr(self.command, "commands")

    def context(self) -> Any:
        return self.command.make_context(self.name, [], resilient_parsing=True)

    def params(self) -> list[Any]:
        return [p for p in self.command.params if not getattr(p, "hidden", False)]

    def flags(self) -> set[str]:
        """Every spelling of every option, `--x` and `--no-x` alike, and --help."""
        return {"--help", *(o for p in self.command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-"))}


def root_command() -> Any:
    import typer

    from kernel_agent.cli import app

    return typer.main.get_command(app)


def commands(root: Any = None) -> Iterator[Command]:
    """Every command and group under the root, depth first, in the order the app declares them."""
    root = root_command() if root is None else root

    def walk(command: Any, path: tuple[str, ...]) -> Iterator[Command]:
        if path:
            yield Command(path, command)
        for name, sub in getattr(command, "commands", {}).items():
            if not getattr(sub, "hidden", False):
                yield from walk(sub, (*path, name))

    return walk(root, ())


def resolve(words: list[str], root: Any = None) -> tuple[Command, list[str]]:
    """The command a command line runs (`review latest` runs `review start`) and the words left for it.

    Parsed the way the app parses it, resiliently (no file checks, no required values); raises LookupError
    naming the words when a group has no such command."""
    root = root_command() if root is None else root
    context = root.make_context(PROGRAM, list(words), resilient_parsing=True)
    command, path = root, ()
    while hasattr(command, "commands"):
        rest = [*_protected(context), *context.args]
        if not rest:
            break
        name, sub, after = command.resolve_command(context, rest)
        if sub is None:  # resilient parsing returns nothing for an unknown word rather than failing
            raise LookupError(f"{' '.join((PROGRAM, *path))} has no command {rest[0]!r}")
        rest = after
        path = (*path, name)
        context = sub.make_context(name, rest, parent=context, resilient_parsing=True)
        command = sub
    return Command(path, command), list(words)


def _protected(context: Any) -> list[str]:
    """The words a group context holds back for its subcommand (click renamed the attribute in 8.2)."""
    held = getattr(context, "_protected_args", None)
    return list(held if held is not None else context.protected_args)


def page(root: Any = None) -> str:
    """The whole command reference as one Markdown page."""
    found = list(commands(root))
    lines = [
        "# Command reference",
        "",
        "Generated from the typer app (`kernel_agent/cli/`) each time the site is built: every command, "
        "argument and option, with the help and default that `--help` prints. Every command also takes "
        "`--help`. Options that stand for a stored run setting are declared once in the config tree; "
        "see [the run options](options.md) for their names in a stored plan and a manifest.",
        "",
        *[f"- [{c.name}](#{anchor(c)})" for c in found],
        "",
    ]
    for command in found:
        lines += section(command)
    return "\n".join(lines)


def anchor(command: Command) -> str:
    return "-".join((PROGRAM, *command.path))


def section(command: Command) -> list[str]:
    context = command.context()
    level = "#" * min(2 + len(command.path) - 1, 4)
    lines = [f"{level} {command.name} {{#{anchor(command)}}}", "", prose(command.command.help or ""), ""]
    if command.is_group:
        subs = [f"`{command.name} {name}`" for name in command.command.commands]
        return [*lines, "Commands: " + ", ".join(subs) + ".", ""]
    lines += ["```text", command.command.get_usage(context), "```", ""]
    for param in command.params():
        term, text = param.get_help_record(context) or (param.name, "")
        lines.append(f"- {code(term)}: {prose(text)}" if text else f"- {code(term)}")
    return [*lines, ""]
