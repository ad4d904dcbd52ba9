"""The run options page, read from the config tree (`optimize/config.py` `RunPlan` and the records it holds):
each option's flag, its name in the plan stored with a run (`runs show --json`, `--resume`), its manifest key
when a manifest may set it per kernel, and its default."""

from __future__ import annotations

from typing import Any

from docsite.markdown import code, prose


def rows() -> list[dict[str, Any]]:
    """One row per option field of the run plan, in declaration order."""
    from dataclasses import fields

    from kernel_agent.core.config import default_of, flag_of, key_of, option_leaves
    from kernel_agent.optimize.config import PER_KERNEL, RunPlan

    per_kernel = {id(f): key_of(f) for kind, names in PER_KERNEL.items() for f in fields(kind) if f.name in names}
    found = []
    for path, field, _ in option_leaves(RunPlan):
        found.append(
            {
                "name": field.name,
                "stored": ".".join((*path, field.name)),
                "flag": flag_of(field),
                "manifest": per_kernel.get(id(field)),
                "default": default_of(field),
                "help": field.metadata["help"],
            }
        )
    return found


def page() -> str:
    from docsite.cli_reference import resolve
    from kernel_agent.optimize.config import manifest_keys

    offered = {p.name for p in resolve(["optimize"])[0].command.params}  # a field's option is named after it
    lines = [
        "# Run options",
        "",
        "Generated from the config tree (`kernel_agent/optimize/config.py` `RunPlan`, `kernel_agent/core/config.py`) "
        "each time the site is built. Each option is declared once, as a field with its default and help; "
        "`optimize` turns the fields into its flags, the run stores them as its plan (the *stored* name, what "
        "`kernel-agent runs show RUN --json` and `--resume` read), and a manifest's `[[kernel]]` tables use the "
        "*manifest* key for the options a single kernel may set.",
        "",
    ]
    for row in rows():
        note = "" if row["name"] in offered else " (not an `optimize` flag)"
        manifest = f", manifest key {code(row['manifest'])}" if row["manifest"] else ""
        lines.append(
            f"- {code(row['flag'])}{note}: stored as {code(row['stored'])}{manifest}, "
            f"default {code(repr(_plain(row['default'])))}. {prose(row['help'])}"
        )
    keys = ", ".join(code(k) for k in sorted(manifest_keys()))
    lines += [
        "",
        "## Manifest",
        "",
        "`kernel-agent optimize --manifest FILE.toml` reads `[[kernel]]` tables (and an optional `[defaults]` "
        f"table merged into each). The keys a table may hold: {keys}. A relative `path` is read from the "
        "manifest's folder; an unknown key, or a number under the option's minimum, is refused with the reason.",
        "",
    ]
    return "\n".join(lines)


def _plain(value: Any) -> Any:
    """Enums and paths as the values a user types."""
    from enum import Enum
    from pathlib import Path

    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return str(value)
    return value
