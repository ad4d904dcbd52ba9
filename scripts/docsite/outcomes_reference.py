"""The outcomes page, read from the enums and the functions that raise flags: every verdict status, every way a
kernel's search ends, every flag text and doctor state, each with the comment the code gives it.

A status's meaning is the comment beside its enum member (`core/verdict.py` `Status`); a flag's text is the
message the code writes, with its `{placeholders}`, read from the functions listed in `FLAG_SOURCES`."""

from __future__ import annotations

import ast
import inspect
import io
import tokenize
from enum import Enum

from docsite.markdown import code, prose

# (module, function): every function whose strings become a verdict's flags (decision.decide gathers them).
FLAG_SOURCES = (
    ("kernel_agent.timing.decision", "decide"),
    ("kernel_agent.timing.decision", "floor_flags"),
    ("kernel_agent.timing.rules", "cross_check"),
)


def member_notes(kind: type[Enum]) -> dict[str, str]:
    """Each member's value -> the comment written beside it in the class body ('' when it has none)."""
    source = inspect.getsource(kind)
    tree = ast.parse(source)
    lines = source.splitlines()
    notes: dict[str, str] = {}
    for node in tree.body[0].body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in kind.__members__:
                segment = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                notes[kind[name].value] = _comment(segment)
    return notes


def _comment(segment: str) -> str:
    found = [
        t.string.lstrip("# ").strip()
        for t in tokenize.generate_tokens(io.StringIO(segment).readline)
        if t.type == tokenize.COMMENT
    ]
    return " ".join(found)


def flag_texts() -> list[tuple[str, str]]:
    """(where, text) for every f-string message in the flag sources, placeholders kept as `{name}`."""
    import importlib

    found = []
    for module_name, function in FLAG_SOURCES:
        module = importlib.import_module(module_name)
        tree = ast.parse(inspect.getsource(getattr(module, function)))
        for node in ast.walk(tree):
            for text in _raised(node):
                found.append((f"{module_name.removeprefix('kernel_agent.')}.{function}", _template(text)))
    return found


def _raised(node: ast.AST) -> list[ast.JoinedStr]:
    """The f-strings a node adds to a list of flags: `x.append(f"...")` or a list literal `[f"..."]`."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append":
        return [a for a in node.args if isinstance(a, ast.JoinedStr)]
    if isinstance(node, ast.List):
        return [e for e in node.elts if isinstance(e, ast.JoinedStr)]
    return []


def _template(node: ast.JoinedStr) -> str:
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif isinstance(value, ast.FormattedValue):
            parts.append("{" + ast.unparse(value.value) + "}")
    return "".join(parts)


def page() -> str:
    from kernel_agent.core.verdict import PASSING, Status
    from kernel_agent.doctor.record import State
    from kernel_agent.evaluate.references import COMPILE_MODES, ReferenceKind
    from kernel_agent.optimize.search_state import TERMINAL, UNPARSEABLE, KernelStatus

    lines = [
        "# Statuses and flags",
        "",
        "Generated from the code each time the site is built: the enums' members with the comment the code "
        "gives each, and the text of every flag. [Reading a verdict](../guide/verdicts.md) explains them.",
        "",
        "## Verdict statuses",
        "",
        "`core/verdict.py` `Status`: the status of one evaluation (`eval`, every candidate of `optimize`, "
        "export's re-verification). `eval` exits 0 for a passing status, 1 for any other, 2 for a usage error.",
        "",
    ]
    notes = member_notes(Status)
    for status in Status:
        passing = "passing" if status.value in PASSING else "not passing"
        lines.append(f"- {code(status.value)} ({passing}): {prose(notes[status.value])}")
    lines += [
        "",
        f"A reply that held no candidate is stored as an attempt marked {code(UNPARSEABLE)}, never as a verdict.",
        "",
        "## How a kernel's search ends",
        "",
        "`optimize/search_state.py` `KernelStatus`: one per kernel and device of a run (`runs show`, the end "
        "table). A run resumed with `--resume` returns the stored result of a finished kernel and continues the "
        "others.",
        "",
    ]
    notes = member_notes(KernelStatus)
    for status in KernelStatus:
        kind = "finished" if status in TERMINAL else "resumable"
        note = notes[status.value].removesuffix(": resumable").removesuffix("resumable")
        lines.append(f"- {code(status.value)} ({kind})" + (f": {prose(note)}" if note else ""))
    lines += ["", "## Flags", "", _flags_intro(), ""]
    for where, text in flag_texts():
        lines.append(f"- {code(text)} ({code(where)})")
    lines += ["", "## Reference points", ""]
    notes = member_notes(ReferenceKind)
    for kind in ReferenceKind:
        lines.append(f"- {code(kind.value)}: {prose(notes[kind.value])}")
    modes = ", ".join(code(m) for m in COMPILE_MODES if m != "default")
    lines += [f"- {code('compile:MODE')}: added by `--compile-mode MODE`, one of {modes}.", ""]
    lines += ["## Doctor states", "", "`doctor/record.py` `State`: the state of one line of `kernel-agent doctor`.", ""]
    notes = member_notes(State)
    lines += [f"- {code(s.value)}" + (f": {prose(notes[s.value])}" if notes[s.value] else "") for s in State]
    return "\n".join([*lines, ""])


def _flags_intro() -> str:
    return (
        "A flag is a reason a human must look at a candidate that passed its checks and measured faster; any flag "
        "makes the verdict `flagged`, which is never accepted nor exported until `kernel-agent review approve`. "
        "The texts below are the messages the code writes, `{...}` standing for the measured values."
    )
