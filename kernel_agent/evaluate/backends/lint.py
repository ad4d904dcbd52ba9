"""AST checks shared by every backend (DESIGN.md section 6, THREATS.md rows 12, 15, 17).

Hard rules reject a candidate before it runs: process, thread and socket use,
frame and heap inspection, importing the problem or its reference. They are a
cheap first layer; the sandbox and the runtime checks hold when they are evaded.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

FORBIDDEN_MODULES = {
    "subprocess": "starts processes",
    "multiprocessing": "starts processes",
    "concurrent": "starts threads or processes",
    "threading": "starts threads",
    "_thread": "starts threads",
    "socket": "opens network sockets",
    "asyncio": "runs background tasks",
    "signal": "installs signal handlers",
    "pty": "starts processes",
    "inspect": "inspects harness frames",
    "gc": "walks the harness heap",
    "problem": "imports the trusted problem (and its reference)",
    "reference": "imports the trusted reference",
    "urllib": "uses the network",
    "http": "uses the network",
    "requests": "uses the network",
    "pickle": "loads arbitrary objects",
    "importlib": "imports modules dynamically",
}
FORBIDDEN_CALLS = {
    "os.system",
    "os.popen",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "os.setsid",
    "os.execv",
    "os.execve",
    "os.execvp",
    "os.spawnv",
    "os.posix_spawn",
    "sys._getframe",
    "sys.settrace",
    "sys.setprofile",
    "eval",
    "exec",
    "__import__",
    "breakpoint",
}
FORBIDDEN_ATTRIBUTES = {
    "f_back": "walks caller frames",
    "f_globals": "reads caller globals",
    "__globals__": "reads function globals",
    "tb_frame": "walks frames",
    "gi_frame": "walks frames",
}


@dataclass
class StaticFinding:
    """A static-check result: `hard` findings reject the candidate before it runs."""

    rule: str
    message: str
    hard: bool
    line: int | None = None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def common_findings(tree: ast.Module, allow_ctypes: bool) -> list[StaticFinding]:
    findings: list[StaticFinding] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                root = name.split(".")[0]
                if root in FORBIDDEN_MODULES:
                    findings.append(
                        StaticFinding(
                            "forbidden-import", f"imports {name} ({FORBIDDEN_MODULES[root]})", True, node.lineno
                        )
                    )
                if root == "ctypes" and not allow_ctypes:
                    findings.append(
                        StaticFinding(
                            "forbidden-import",
                            "imports ctypes (raw memory access) outside the cpp backend",
                            True,
                            node.lineno,
                        )
                    )
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in FORBIDDEN_CALLS:
                findings.append(StaticFinding("forbidden-call", f"calls {name}()", True, node.lineno))
        elif isinstance(node, ast.Attribute) and node.attr in FORBIDDEN_ATTRIBUTES:
            findings.append(
                StaticFinding(
                    "forbidden-attribute", f"uses .{node.attr} ({FORBIDDEN_ATTRIBUTES[node.attr]})", True, node.lineno
                )
            )
        elif isinstance(node, ast.ClassDef):
            for base in node.bases:
                if _dotted(base) in ("Model", "problem.Model"):
                    findings.append(
                        StaticFinding(
                            "subclasses-reference",
                            f"class {node.name} subclasses the reference Model",
                            True,
                            node.lineno,
                        )
                    )
        elif isinstance(node, ast.Try):
            findings.append(
                StaticFinding(
                    "try-fallback", "try/except around kernel code can hide a fallback path", False, node.lineno
                )
            )
    return findings


def module_string_literal(tree: ast.Module, name: str) -> str | None:
    """The value of a top-level `NAME = "literal"` assignment, if it is one."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
            return None
    return None


def defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


def calls_named(tree: ast.Module, name: str) -> bool:
    return any(isinstance(n, ast.Call) and _dotted(n.func).split(".")[-1] == name for n in ast.walk(tree))
