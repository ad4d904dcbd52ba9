"""The problem-file format page, read from the code that reads problem files: every name a problem module may
define (the `getattr(module, "NAME", default)` reads of the functions in `READERS`), the default tolerances, and
every message with which the loader refuses a problem (its `raise ProblemError(...)`)."""

from __future__ import annotations

import ast
import importlib
import inspect
from dataclasses import dataclass

from docsite.markdown import code, prose

# (module, function): the functions that read a problem module's names. A loop over names whose variable is
# called `required...` reads names the file must define.
READERS = (
    ("kernel_agent.problem.load", "_load_native"),
    ("kernel_agent.problem.load", "_check_shape_of"),
    ("kernel_agent.measure.work", "work_counts"),
    ("kernel_agent.tune.space", "shape_sets"),
    ("kernel_agent.select.stored", "load"),
    ("kernel_agent.problem.load", "_load_kernelbench"),
)
MODULE_EXPRESSIONS = ("module", "problem.module")
LOCATION_PREFIXES = ("{path}: ", "{problem_file}: ", "{file}: ", "{folder}: ")


@dataclass(frozen=True)
class Name:
    name: str
    absent: str | None  # the default as the reader writes it; None: the file must define it
    reader: str


def names() -> list[Name]:
    """Each name the readers take from a problem module, once, in the order first read."""
    found: dict[str, Name] = {}
    for module_name, function in READERS:
        tree = _function_tree(module_name, function)
        where = f"{module_name.removeprefix('kernel_agent.')}.{function}"
        for name in _read(tree, where):
            found.setdefault(name.name, name)
    return list(found.values())


def _function_tree(module_name: str, function: str) -> ast.AST:
    return ast.parse(inspect.getsource(getattr(importlib.import_module(module_name), function)))


def _read(tree: ast.AST, where: str) -> list[Name]:
    loops = {}  # loop variable -> (its constant names, whether it names required ones)
    for node in ast.walk(tree):
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Tuple):
            constants = [e.value for e in node.iter.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            loops[node.target.id] = (constants, node.target.id.startswith("required"))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    found = []
    for node in sorted((n for n in ast.walk(tree) if _is_module_getattr(n)), key=lambda n: n.lineno):
        key, default = node.args[1], node.args[2] if len(node.args) > 2 else None
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.append(Name(key.value, _absent(node, default, parents), where))
        elif isinstance(key, ast.Name) and key.id in loops:
            constants, required = loops[key.id]
            found += [Name(c, None if required else _absent(node, default, parents), where) for c in constants]
    return found


def _is_module_getattr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and ast.unparse(node.args[0]) in MODULE_EXPRESSIONS
    )


def _absent(node: ast.Call, default: ast.AST | None, parents: dict) -> str | None:
    """What stands in for a missing name: `getattr(...) or X` means X, else the getattr default."""
    parent = parents.get(node)
    if isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.Or) and parent.values[0] is node:
        return ast.unparse(parent.values[1])
    return ast.unparse(default) if default is not None else None


def refusals() -> list[str]:
    """Every message the loader refuses a problem with, `{...}` standing for the values it names."""
    tree = ast.parse(inspect.getsource(importlib.import_module("kernel_agent.problem.load")))
    found = []
    raises = [n for n in ast.walk(tree) if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call)]
    for node in sorted(raises, key=lambda n: n.lineno):
        if ast.unparse(node.exc.func) == "ProblemError":
            message = node.exc.args[0]
            text = _template(message) if isinstance(message, ast.JoinedStr) else ast.unparse(message)
            for prefix in LOCATION_PREFIXES:
                text = text.removeprefix(prefix)
            if text not in found:
                found.append(text)
    return found


def _template(node: ast.JoinedStr) -> str:
    return "".join(
        str(v.value) if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}" for v in node.values
    )


def page() -> str:
    from kernel_agent.problem.load import DEFAULT_NORM_TOLERANCES, DEFAULT_TOLERANCES, KNOWN_DISTRIBUTIONS

    lines = [
        "# Problem format",
        "",
        "Generated from the code that reads problem files each time the site is built. "
        "[Writing a problem](../guide/problems.md) shows how to write one.",
        "",
        "## Names a problem module may define",
        "",
        "A native problem is a folder with `problem.py` (these names) and `kernel.py` (the baseline, "
        "`kernel(*inputs)`); a KernelBench problem is one file with `Model`, `get_inputs` and `get_init_inputs`. "
        "*When absent* is what the reader uses instead, as its code writes it; *required* names must be defined.",
        "",
    ]
    for name in names():
        absent = "required" if name.absent is None else f"when absent {code(name.absent)}"
        lines.append(f"- {code(name.name)}: {absent} (read by {code(name.reader)})")
    lines += ["", "## Default tolerances", "", "| dtype | rtol | atol | normwise |", "|---|---|---|---|"]
    for dtype, (rtol, atol) in DEFAULT_TOLERANCES.items():
        lines.append(f"| {dtype} | {rtol:g} | {atol:g} | {DEFAULT_NORM_TOLERANCES[dtype]:g} |")
    lines += [
        "",
        f"Input distributions (`INPUT_DISTRIBUTIONS`): {', '.join(code(d) for d in KNOWN_DISTRIBUTIONS)}.",
        "",
        "## What the loader refuses",
        "",
        "`kernel_agent/problem/load.py` refuses a problem with one line that starts with the file's path; "
        "the messages, `{...}` standing for the values it names:",
        "",
        *[f"- {prose(text)}" for text in refusals()],
        "",
    ]
    return "\n".join(lines)
