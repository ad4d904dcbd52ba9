"""Print the house measures of STYLE.md for a Python package, using `ast` only.

Usage: python scripts/house_measures.py [PATH]   (PATH defaults to kernel_agent/ under the repo root)

Every `*.py` file under PATH is parsed; a file that cannot be read or parsed is counted and named,
never fatal. Each measure answers one question about the house:

- Modules (count, median and max lines, modules at the package root). Lines are physical lines.
  The package root count excludes `__init__.py` and `__main__.py`: it says whether the flow shows
  in the tree or sits flat in one folder.
- Functions and methods (count, median, p90, number and share over 60 lines, the longest five).
  Every `def` and `async def` counts, nested ones and methods included; a function's length runs
  from its first decorator (or its `def` line) to its last line. p90 is the nearest-rank
  percentile.
  It says whether functions stay short enough to read top to bottom.
- Classes (count, median, max lines, same span rule): whether a class has become a god class.
- `dict[str, Any]` in annotations: each `dict[str, Any]` (also `Dict[...]`, `typing.Any`) inside
  an argument, return or variable annotation, nested ones included; quoted annotations are parsed.
  It says how many records between stages are untyped. Occurrences outside annotations (casts,
  aliases) are shown on a second line.
- Bare status strings: string literals equal to a verdict status (`faster`, `correct`, `flagged`,
  `incorrect`, `rejected`, `runtime_error`, `compile_error`, `crashed`, `timeout`) that are
  compared (either side of `==`, `!=`, `in`, `not in`, or an element of a literal container on
  the right of `in`), assigned (the whole value of `=`, `:=`, an annotated assignment or a
  default), passed as `status=` or as the first positional argument of an exception, a `Verdict`, a
  `Decision` or a `Status`, stored under a `"status"` key, returned, or matched in a `case`.
  Member definitions inside an `Enum` class (or the project's `Choice` enums) are not counted. It is
  a rough count: `"timeout"` compared as an option name counts too. It says whether the status is a
  type or a convention.
- Stage folders: lines per folder at the package root (each a stage: `evaluate/`, `sandbox/`,
  `timing/`, ...; root modules are not a stage), and the largest one's share of the package's lines.
  It says whether one wing holds too many concepts. The largest module is named with its lines.
- Import circles: every `import` and `from ... import` of the package's own modules, at top level or
  inside a function (relative ones resolved), with `from P import m` counted as an import of the
  module `P.m` when there is one. File-pair circles are two modules that import each other; folder
  cycles are cycles between stage folders (Tarjan's strongly connected components). It says
  whether the layers hold.
- Options declared more than once: parameter names whose default literal appears in two or more
  places, over CLI options (`typer.Option` / `typer.Argument` defaults, module-level shared
  `NAME = typer.Option(...)` declarations counted once under `name`, and plain defaults of
  functions under `cli/`), dataclass fields, and keyword defaults of every other function. Numbers
  compare by value (180 and 180.0 are one default). Literals passed in calls
  (`EvalOptions(rounds=3)`) are not declarations and are not counted. `None`
  defaults are left out (they say "not given", not a value). A default that is a name
  (`min_gain=DEFAULT_MIN_GAIN`) is not a literal and is not counted: that is the fix. It says
  whether a default is written once.
"""

from __future__ import annotations

import ast
import math
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

LONG_FUNCTION = 60
STATUSES = frozenset(
    {
        "faster",
        "correct",
        "flagged",
        "incorrect",
        "rejected",
        "runtime_error",
        "compile_error",
        "crashed",
        "timeout",
    }
)
NO_VALUE = object()


@dataclass
class Module:
    path: Path
    rel: str
    lines: int
    tree: ast.Module | None


@dataclass
class Tally:
    functions: list[tuple[int, str]] = field(default_factory=list)
    classes: list[tuple[int, str]] = field(default_factory=list)
    dict_any_annotations: int = 0
    dict_any_elsewhere: int = 0
    statuses: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    options: dict[tuple[str, str], list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))


def load(root: Path) -> tuple[list[Module], list[str]]:
    modules, failed = [], []
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)
    base = root.parent if root.is_file() else root
    for path in files:
        rel = path.relative_to(base).as_posix()
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            failed.append(f"{rel} ({e.strerror or e})")
            continue
        try:
            tree = ast.parse(text, filename=str(path))
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            failed.append(f"{rel} ({type(e).__name__})")
            tree = None
        modules.append(Module(path, rel, len(text.splitlines()), tree))
    return modules, failed


def span(node: ast.AST) -> int:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    end = getattr(node, "end_lineno", None) or node.lineno
    return end - start + 1


def name_of(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return name_of(node.func)
    return ""


def is_dict_any(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Subscript) and name_of(node.value) in ("dict", "Dict")):
        return False
    args = node.slice
    if not (isinstance(args, ast.Tuple) and len(args.elts) == 2):
        return False
    key, value = args.elts
    key_is_str = name_of(key) == "str" or (isinstance(key, ast.Constant) and key.value == "str")
    return key_is_str and name_of(value) == "Any"


def count_dict_any(annotation: ast.AST | None) -> int:
    if annotation is None:
        return 0
    total = 0
    for node in ast.walk(annotation):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                total += count_dict_any(ast.parse(node.value, mode="eval").body)
            except (SyntaxError, ValueError, RecursionError):
                pass
        elif is_dict_any(node):
            total += 1
    return total


def annotations(nodes: list[ast.AST]) -> list[ast.AST]:
    found: list[ast.AST] = []
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            for arg in [*getattr(a, "posonlyargs", []), *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None and arg.annotation is not None:
                    found.append(arg.annotation)
            if node.returns is not None:
                found.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
    return found


def literal(node: ast.AST | None) -> object:
    """The default's value when it is a literal (negative numbers and containers included), else NO_VALUE."""
    if node is None:
        return NO_VALUE
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NO_VALUE


def status_literal(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in STATUSES:
        return node.value
    return None


def status_strings(nodes: list[ast.AST]) -> list[str]:
    enum_members: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.ClassDef) and any(
            name_of(b).endswith("Enum") or name_of(b) == "Choice" for b in node.bases
        ):
            enum_members.update(id(s.value) for s in node.body if isinstance(s, (ast.Assign, ast.AnnAssign)))
    hits: list[ast.AST | None] = []
    for node in nodes:
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                hits.append(operand)
                if isinstance(operand, (ast.Tuple, ast.List, ast.Set)):
                    hits.extend(operand.elts)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr, ast.Return)):
            if id(node.value) not in enum_members:
                hits.append(node.value)
        elif isinstance(node, ast.keyword) and node.arg == "status":
            hits.append(node.value)
        elif isinstance(node, ast.Call) and takes_a_status(node.func) and node.args:
            hits.append(node.args[0])  # `WorkerFailure("crashed", ...)`, `Verdict("rejected")`: passed by position
        elif isinstance(node, ast.Dict):
            keyed = zip(node.keys, node.values)
            hits.extend(v for k, v in keyed if isinstance(k, ast.Constant) and k.value == "status")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            hits.extend([*node.args.defaults, *node.args.kw_defaults])
        elif isinstance(node, ast.MatchValue):
            hits.append(node.value)
    return [s for s in map(status_literal, hits) if s is not None]


def takes_a_status(func: ast.AST) -> bool:
    """A call whose first positional argument is a status: an exception of a stage, a verdict, a decision."""
    name = name_of(func)
    return name.endswith(("Error", "Failure", "Exception")) or name in ("Verdict", "Decision", "Status")


def typer_default(call: ast.Call) -> object:
    for kw in call.keywords:
        if kw.arg == "default":
            return literal(kw.value)
    if call.args and not (isinstance(call.args[0], ast.Constant) and call.args[0].value is Ellipsis):
        return literal(call.args[0])
    return NO_VALUE


def is_typer_param(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Call) and name_of(node.func) in ("Option", "Argument")


def annotated_typer(annotation: ast.AST | None) -> ast.Call | None:
    """`Annotated[int, typer.Option(...)]`: the Option call, else None."""
    if isinstance(annotation, ast.Subscript) and name_of(annotation.value) == "Annotated":
        for node in ast.walk(annotation.slice):
            if is_typer_param(node):
                return node  # type: ignore[return-value]
    return None


def function_options(node: ast.FunctionDef | ast.AsyncFunctionDef, in_cli: bool) -> list[tuple[str, object, str]]:
    a = node.args
    positional = [*getattr(a, "posonlyargs", []), *a.args]
    with_default = positional[len(positional) - len(a.defaults) :]
    pairs = [*zip(with_default, a.defaults), *zip(a.kwonlyargs, a.kw_defaults)]
    found = []
    for arg, default in pairs:
        meta = annotated_typer(arg.annotation)
        if is_typer_param(default):
            found.append((arg.arg, typer_default(default), "cli"))  # type: ignore[arg-type]
        elif meta is not None:
            value = literal(default)
            found.append((arg.arg, typer_default(meta) if value is NO_VALUE else value, "cli"))
        else:
            found.append((arg.arg, literal(default), "cli" if in_cli else "kwarg"))
    return found


def shared_typer_options(tree: ast.Module) -> list[tuple[str, object, str]]:
    """Module-level `TIMEOUT = typer.Option(180.0, ...)`, shared by several commands: option `timeout`."""
    found = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            if is_typer_param(stmt.value):
                found.append((stmt.targets[0].id.lower(), typer_default(stmt.value), "cli"))  # type: ignore[arg-type]
    return found


def option_key(value: object) -> str:
    """180 and 180.0 are one default; True and 1 are not."""
    if isinstance(value, float) and value.is_integer():
        return repr(int(value))
    return repr(value)


def is_dataclass(node: ast.ClassDef) -> bool:
    return any(name_of(d) == "dataclass" for d in node.decorator_list)


def dataclass_options(node: ast.ClassDef) -> list[tuple[str, object, str]]:
    found = []
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None):
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and name_of(value.func) == "field":
            value = next((kw.value for kw in value.keywords if kw.arg == "default"), None)
        elif isinstance(value, ast.Call) and name_of(value.func) == "option":  # core.config.option(default, ...)
            value = (
                value.args[0] if value.args else next((kw.value for kw in value.keywords if kw.arg == "default"), None)
            )
        found.append((stmt.target.id, literal(value), "dataclass"))
    return found


def measure_module(module: Module, tally: Tally) -> None:
    tree = module.tree
    if tree is None:
        return
    in_cli = "cli" in Path(module.rel).parts[:-1] or Path(module.rel).name.startswith("cli")
    options: list[tuple[str, object, str]] = []
    nodes = list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            tally.functions.append((span(node), f"{module.rel}:{node.lineno} {node.name}"))
            options.extend(function_options(node, in_cli))
        elif isinstance(node, ast.ClassDef):
            tally.classes.append((span(node), f"{module.rel}:{node.lineno} {node.name}"))
            if is_dataclass(node):
                options.extend(dataclass_options(node))
    if in_cli:
        options.extend(shared_typer_options(tree))
    in_annotations = sum(count_dict_any(a) for a in annotations(nodes))
    tally.dict_any_annotations += in_annotations
    tally.dict_any_elsewhere += sum(1 for n in nodes if is_dict_any(n)) - in_annotations
    for status in status_strings(nodes):
        tally.statuses[status] += 1
    for name, value, kind in options:
        if value is NO_VALUE or value is None or name in ("self", "cls"):
            continue
        tally.options[(name, option_key(value))].append((kind, module.rel))


def module_name(rel: str) -> str:
    """`evaluate/backends/lint.py` -> `evaluate.backends.lint`; a package's `__init__.py` is the package."""
    parts = rel[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(module: Module, package: str, known: set[str]) -> set[str]:
    """The package's own modules that `module` imports, anywhere in its body (names relative to the package)."""
    if module.tree is None:
        return set()
    own = module_name(module.rel)
    here = own.split(".") if module.rel.endswith("__init__.py") else own.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(module.tree):
        targets: list[tuple[str, list[str]]] = []
        if isinstance(node, ast.Import):
            targets = [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1] if node.level > 1 else here
                name = ".".join([package, *base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            targets = [(name, [alias.name for alias in node.names])]
        for name, names in targets:
            if name != package and not name.startswith(package + "."):
                continue
            inner = name[len(package) + 1 :] if name != package else ""
            for alias in names or [""]:
                sub = f"{inner}.{alias}".strip(".") if alias else inner
                target = sub if sub in known else inner
                if target in known and target != own:
                    found.add(target)
    return found


def import_graph(modules: list[Module], package: str) -> dict[str, set[str]]:
    known = {module_name(m.rel) for m in modules}
    return {module_name(m.rel): imported_modules(m, package, known) for m in modules}


def pair_circles(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted((a, b) for a, targets in graph.items() for b in targets if a < b and a in graph.get(b, set()))


def stage_of(name: str) -> str | None:
    return name.split(".")[0] if "." in name else None  # a root module (or the root package) is no stage


def folder_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of two or more stage folders (Tarjan)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for src, targets in graph.items():
        for dst in targets:
            a, b = stage_of(src), stage_of(dst)
            if a is not None and b is not None and a != b:
                edges[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                top = stack.pop()
                members.append(top)
                if top == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def stage_lines(modules: list[Module]) -> dict[str, int]:
    lines: dict[str, int] = defaultdict(int)
    for m in modules:
        stage = stage_of(module_name(m.rel)) if "/" in m.rel else None
        if stage is not None:
            lines[stage] += m.lines
    return dict(lines)


def p90(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]


def table(rows: list[tuple[str, ...]], indent: str = "  ") -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def sizes(items: list[tuple[int, str]]) -> tuple[str, str, str]:
    lengths = [n for n, _ in items]
    if not lengths:
        return "0", "-", "-"
    return str(len(lengths)), f"{statistics.median(lengths):g}", str(max(lengths))


def report(root: Path, modules: list[Module], failed: list[str], tally: Tally, seconds: float) -> str:
    out = [f"house measures of {root}"]
    root_modules = sorted(m.rel for m in modules if "/" not in m.rel and m.rel not in ("__init__.py", "__main__.py"))
    folders = sorted({m.rel.split("/")[0] for m in modules if "/" in m.rel})
    count, median, longest = sizes([(m.lines, m.rel) for m in modules])
    largest = max(modules, key=lambda m: (m.lines, m.rel)) if modules else None
    rows = [("measure", "value")]
    rows += [("modules", count), ("module lines, median", median)]
    rows += [("module lines, max", longest + (f" ({largest.rel})" if largest is not None else ""))]
    total = sum(m.lines for m in modules)
    stages = stage_lines(modules)
    if stages:
        name, lines = max(stages.items(), key=lambda kv: (kv[1], kv[0]))
        rows += [("largest stage folder", f"{name}/ {lines} lines, {100 * lines / max(1, total):.1f}% of {total}")]
    graph = import_graph(modules, root.resolve().name if root.is_dir() else root.resolve().parent.name)
    circles, cycles = pair_circles(graph), folder_cycles(graph)
    rows += [("file-pair import circles", str(len(circles)) + "".join(f" ({a} <-> {b})" for a, b in circles))]
    rows += [("folder cycles", str(len(cycles)) + "".join(f" ({' -> '.join(c)})" for c in cycles))]
    rows += [
        ("modules at the package root", str(len(root_modules))),
        ("folders at the package root", str(len(folders))),
    ]
    lengths = [n for n, _ in tally.functions]
    over = sum(1 for n in lengths if n > LONG_FUNCTION)
    count, median, longest = sizes(tally.functions)
    rows += [("functions and methods", count), ("function lines, median", median)]
    rows += [("function lines, p90", str(p90(lengths)) if lengths else "-"), ("function lines, max", longest)]
    rows += [(f"functions over {LONG_FUNCTION} lines", f"{over} ({100 * over / max(1, len(lengths)):.1f}%)")]
    count, median, longest = sizes(tally.classes)
    rows += [("classes", count), ("class lines, median", median), ("class lines, max", longest)]
    rows += [("dict[str, Any] in annotations", str(tally.dict_any_annotations))]
    rows += [("dict[str, Any] elsewhere", str(tally.dict_any_elsewhere))]
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(tally.statuses.items(), key=lambda kv: (-kv[1], kv[0])))
    rows += [("bare status strings", f"{sum(tally.statuses.values())}" + (f" ({statuses})" if statuses else ""))]
    repeated = {k: v for k, v in tally.options.items() if len(v) >= 2}
    both = sum(1 for places in repeated.values() if {"cli", "dataclass"} <= {k for k, _ in places})
    rows += [("options declared more than once", f"{len(repeated)} ({both} both on the CLI and in a dataclass)")]
    rows += [("files not parsed", str(len(failed)) + (f" ({', '.join(failed)})" if failed else ""))]
    out.append(table(rows))
    if root_modules:
        out.append("\nmodules at the package root: " + " ".join(root_modules))
    if stages:
        out.append("\nstage folders by lines")
        ranked = sorted(stages.items(), key=lambda kv: (-kv[1], kv[0]))
        out.append(
            table(
                [("folder", "lines", "share")]
                + [(f"{n}/", str(v), f"{100 * v / max(1, total):.1f}%") for n, v in ranked]
            )
        )
    if tally.functions:
        out.append("\nlongest functions")
        longest_five = sorted(tally.functions, key=lambda item: (-item[0], item[1]))[:5]
        out.append(table([("lines", "function")] + [(str(n), where) for n, where in longest_five]))
    if repeated:
        out.append("\noptions declared more than once (name=default: count, where)")
        ordered = sorted(repeated.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        rows = [("option", "count", "kinds", "files")]
        for (name, value), places in ordered:
            kinds = ",".join(sorted({k for k, _ in places}))
            files = ", ".join(sorted({f for _, f in places}))
            rows.append((f"{name}={value}", str(len(places)), kinds, files))
        out.append(table(rows))
    out.append(f"\n({len(modules)} files in {seconds:.2f} s)")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1] / "kernel_agent"
    if not root.exists():
        print(f"no such path: {root}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    modules, failed = load(root.resolve())
    tally = Tally()
    for module in modules:
        try:
            measure_module(module, tally)
        except (RecursionError, MemoryError, ValueError) as e:
            failed.append(f"{module.rel} (measure: {type(e).__name__})")
    print(report(root, modules, failed, tally, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
