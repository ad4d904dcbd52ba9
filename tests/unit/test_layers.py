"""The stage folders import one another only along the edges docs/DESIGN.md allows, and never in a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kernel_agent"
ANYWHERE = {"cpp", "kernel_agent", "__version__"}  # the root package's own modules: leaves every stage may use


def allowed() -> dict[str, set[str]]:
    text = (ROOT / "docs" / "DESIGN.md").read_text()
    block = text.split("**Which stage may import which**", 1)[1].split("```", 2)[1]
    edges = {}
    for line in block.strip().splitlines():
        stage, _, targets = line.partition("->")
        edges[stage.strip()] = set(targets.split())
    return edges


def imports() -> dict[str, dict[str, str]]:
    """folder -> imported folder -> one module that imports it (for the message)."""
    found: dict[str, dict[str, str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if len(rel.parts) == 1:
            continue  # the root modules (__main__ runs the CLI; cpp is a leaf)
        src = rel.parts[0]
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] != "kernel_agent" or len(parts) < 2 or parts[1] == src or parts[1] in ANYWHERE:
                    continue
                found.setdefault(src, {}).setdefault(parts[1], str(rel))
    return found


def test_every_import_between_stages_is_an_allowed_edge() -> None:
    rules, actual = allowed(), imports()
    stray = [
        f"{src} -> {dst} ({where})"
        for src, targets in actual.items()
        if src != "cli"
        for dst, where in targets.items()
        if dst not in rules.get(src, set())
    ]
    assert not stray, "imports outside docs/DESIGN.md's list: " + "; ".join(sorted(stray))


def test_the_allowed_edges_have_no_cycle() -> None:
    rules = allowed()
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in rules.get(node, ()):
            assert state.get(nxt) != "open", "cycle: " + " -> ".join([*path, node, nxt])
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = "done"

    for stage in rules:
        if stage not in state:
            visit(stage, [])


def test_the_database_imports_core_records_only() -> None:
    """Issue 34: no stage's internals reach the schema; widening DESIGN's line for `db` fails here too."""
    assert allowed()["db"] == {"core"}
    assert set(imports().get("db", {})) <= {"core"}, imports()["db"]
