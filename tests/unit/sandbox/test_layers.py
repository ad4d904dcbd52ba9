"""The trust boundary in the imports: the trusted side never imports the code that runs beside the candidate,
and that code imports from the trusted side only what both sides share (read by `ast`, every import
statement, at top level or inside a function)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "kernel_agent"
INSIDE = "kernel_agent.sandbox.inside"
HOST = "kernel_agent.sandbox.host"
# What the worker's process may import of the package: the shared modules beside the protocol, the device
# path's transport (its handles and the CUDA IPC both ends use), and the leaves the worker needs (statuses,
# the C++ loader, the profiler breakdown).
SHARED = (
    "kernel_agent.sandbox.protocol",
    "kernel_agent.sandbox.channel",
    "kernel_agent.sandbox.tensors",
    "kernel_agent.sandbox.lifeline",
)
INSIDE_MAY_IMPORT = (
    INSIDE,
    *SHARED,
    "kernel_agent.sandbox.device.transport",
    "kernel_agent.sandbox.device.cuda_ipc",
    "kernel_agent.core",
    "kernel_agent.problem",
    "kernel_agent.measure.op_breakdown",
    "kernel_agent.cpp",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> list[tuple[str, int]]:
    """Every package module or name an import statement in `path` names, with its line."""
    name = module_name(path).split(".")
    return names_in(path.read_text(), name if path.name == "__init__.py" else name[:-1])


def names_in(source: str, package: list[str]) -> list[tuple[str, int]]:
    """`from a import b` gives `a.b` (b may be a module); a relative import is resolved against `package`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return [(name, line) for name, line in found if name.startswith("kernel_agent")]


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def modules(under: str = "") -> list[Path]:
    return sorted((PACKAGE / under).rglob("*.py"))


def test_nothing_outside_the_worker_imports_it() -> None:
    """The worker is started by its module's name (`host/launch.py`), never imported by the trusted side."""
    inside = PACKAGE / "sandbox" / "inside"
    stray = [
        f"{path.relative_to(PACKAGE)}:{line} imports {name}"
        for path in modules()
        if inside not in path.parents
        for name, line in imported(path)
        if within(name, (INSIDE,))
    ]
    assert not stray, stray


def test_the_worker_imports_nothing_of_the_host_and_only_what_both_sides_share() -> None:
    stray = [
        f"{path.relative_to(PACKAGE)}:{line} imports {name}"
        for path in modules("sandbox/inside")
        for name, line in imported(path)
        if within(name, (HOST,)) or not within(name, INSIDE_MAY_IMPORT)
    ]
    assert not stray, stray


def test_the_shared_modules_import_neither_side() -> None:
    shared = [PACKAGE / (name.removeprefix("kernel_agent.").replace(".", "/") + ".py") for name in SHARED]
    stray = [
        f"{path.relative_to(PACKAGE)}:{line} imports {name}"
        for path in shared + modules("sandbox/device")
        for name, line in imported(path)
        if within(name, (HOST, INSIDE))
    ]
    assert not stray, stray


def test_imports_are_read_in_every_form() -> None:
    """The reader the rules above rest on sees a module named in each way Python allows."""
    source = (
        "import kernel_agent.sandbox.inside.worker\n"
        "from kernel_agent.sandbox import inside\n"
        "from ..inside import kernel_call\n"
        "import json\n"
        "def later():\n"
        "    from kernel_agent.sandbox.inside.loading import entry_point\n"
    )
    names = sorted(name for name, _ in names_in(source, ["kernel_agent", "sandbox", "host"]))
    assert names == [
        "kernel_agent.sandbox.inside",
        "kernel_agent.sandbox.inside.kernel_call",
        "kernel_agent.sandbox.inside.loading.entry_point",
        "kernel_agent.sandbox.inside.worker",
    ]
    assert all(within(name, (INSIDE,)) for name in names)
    assert not within("kernel_agent.sandbox.insider", (INSIDE,))
