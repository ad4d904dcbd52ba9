"""The files of an exported package: the runtime copied verbatim, the rest rendered from templates.

Kept apart from package.py so the choice of winners and the re-verification read on their own.
Why two sources: the dispatch and fallback logic is the same in every package, so it lives in
runtime/ as real modules (linted and unit-tested there) and ships byte for byte; only what differs
per package (the kernel table, the entry points, pyproject.toml, the tests, BENCHMARKS.md) is a
jinja2 template under templates/.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
import shutil
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from kernel_agent import cpp
from kernel_agent.core.certificate import FILE_NAME, Bundle, Certificate, sha256_file
from kernel_agent.core.relative import Relative
from kernel_agent.evaluate.backends import get_backend
from kernel_agent.export.runtime.dispatch import force_variable
from kernel_agent.export.seal import seal
from kernel_agent.export.tuned import TunedTable


def module_literals(source: str, names: tuple[str, ...]) -> dict[str, Any]:
    """The module-level `NAME = <literal>` assignments of a problem file among `names` (never executed: the
    export reads the stored text); one that is not a literal is left out."""
    values: dict[str, Any] = {}
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return values
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in names:
                try:
                    values[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    pass
    return values


def shape_names(problem_source: str) -> tuple[str, ...]:
    """The problem's SHAPE_NAMES literal (the names a caller's shape dict uses), else d0, d1, ... (up to 8), as
    `tune.space.shape_sets` names them."""
    names = module_literals(problem_source, ("SHAPE_NAMES",)).get("SHAPE_NAMES")
    return tuple(str(n) for n in names) if isinstance(names, (list, tuple)) else tuple(f"d{i}" for i in range(8))


RUNTIME = Path(__file__).with_name("runtime")
TEMPLATES = Path(__file__).with_name("templates")
# Where a runtime file lands in the exported folder when not in the package's _runtime/ subpackage.
RUNTIME_ELSEWHERE = {"checks.py": "tests/_checks.py"}  # the generated tests' helper


@dataclass
class ExportedKernel:
    """One kernel as it goes into the package: its winner, what it was verified on, its provenance."""

    name: str  # the Python identifier used in the package
    problem: str
    run_id: int
    candidate_id: int
    source: str
    reference_source: str
    backend: str
    verified: list[tuple[str, str]]  # (device, dtype)
    tolerances: dict[str, tuple[float, float]]
    speedup: float | None
    ci: tuple[float | None, float | None]
    baseline_ms: float | None
    candidate_ms: float | None
    device: str
    device_name: str
    isolation: str
    environment: dict[str, Any]
    date: str
    status: str
    review: str
    reverified: str
    # "native": a kernel(*inputs) function; "kernelbench": an nn.Module ModelNew with the reference's weights
    kind: str = "native"
    extra: dict[str, Any] = field(default_factory=dict)
    interpreted: bool = False  # verified under the Triton interpreter only: correct, never timed
    vs: dict[str, Relative] = field(default_factory=dict)  # "eager", "compile": against torch on its device
    tuned: list[TunedTable] = field(default_factory=list)  # per-shape config tables, one per device
    record_candidate: int | None = None  # whose evaluation the speedup and times are: the winner's, or its re-timing
    pending: str = ""  # "re-timing": the winner's early look is too wide to quote yet, so speedup is None
    baseline_source: str = ""  # the problem's baseline, shipped so verify-package can time against it again
    evidence: Certificate | None = None  # the verdict certificate, less the shipped files' digests

    def speedup_text(self) -> str:
        """`1.4750x [1.3500, 1.6100]`, `re-timing`, or '' when nothing was timed."""
        if self.pending or self.speedup is None:
            return self.pending
        low, high = self.ci
        interval = f" [{low:.4f}, {high:.4f}]" if low is not None and high is not None else ""
        return f"{self.speedup:.4f}x{interval}"

    def loses_to(self) -> list[str]:
        """The torch references ("eager", "compile") whose interval lies wholly above this kernel's speed."""
        return [kind for kind, r in self.vs.items() if r.value is not None and r.ci is not None and r.ci[1] < 1.0]


BENCH_COLUMNS = (
    "kernel",
    "problem",
    "run",
    "candidate",
    "status",
    "review",
    "device",
    "device_name",
    "torch",
    "triton",
    "cuda",
    "isolation",
    "date",
    "speedup",
    "ci_low",
    "ci_high",
    "baseline_ms",
    "candidate_ms",
    "vs_eager",
    "vs_eager_ci_low",
    "vs_eager_ci_high",
    "vs_compile",
    "vs_compile_ci_low",
    "vs_compile_ci_high",
    "loses_to",
    "reverified",
    "record_candidate",
    "pending",
)


def identifier(name: str) -> str:
    """A problem name as a Python identifier (`cpp-softmax` -> `cpp_softmax`, `1x` -> `k_1x`)."""
    ident = re.sub(r"\W", "_", name)
    return f"k_{ident}" if not ident or ident[0].isdigit() else ident


def rewrite_imports(source: str) -> str:
    """Point `kernel_agent.cpp` imports at the package's own copy of the loader."""
    source = re.sub(r"^(\s*)from\s+kernel_agent\.cpp\s+import\s", r"\1from ._cpp import ", source, flags=re.M)
    return re.sub(r"^(\s*)import\s+kernel_agent\.cpp\s+as\s+(\w+)", r"\1from . import _cpp as \2", source, flags=re.M)


def restore_imports(source: str) -> str:
    """`rewrite_imports` undone: the source as it was evaluated, from the package's copy (verify-package)."""
    source = re.sub(r"^(\s*)from\s+\._cpp\s+import\s", r"\1from kernel_agent.cpp import ", source, flags=re.M)
    aliased = r"^(\s*)from\s+\.\s+import\s+_cpp\s+as\s+(\w+)"
    return re.sub(aliased, r"\1import kernel_agent.cpp as \2", source, flags=re.M)


def shipped(header: str, source: str) -> str:
    """A module as a package ships it: one comment line naming where it came from, then the source."""
    return f"# {header}\n{source}"


def unshipped(text: str) -> str | None:
    """The source of a shipped module (`shipped` undone), or None when its first line is not the header."""
    head, _, rest = text.partition("\n")
    return restore_imports(rest) if head.startswith("# ") else None


def write_certificates(folder: Path, package: str, fmt: str, variant: str, kernels: list[ExportedKernel]) -> None:
    """`certificate.json` in `folder`: each kernel's certificate with the digests of the files it ships there
    (its kernel module, its tuned-config modules, its reference and baseline)."""
    found = []
    for k in kernels:
        if k.evidence is None:
            continue
        names = [p for p in folder.glob("*.py") if _belongs(p.name, k.name)]
        digests = {p.relative_to(folder).as_posix(): sha256_file(p.read_bytes()) for p in names}
        found.append(k.evidence.with_files(digests, variant))
    bundle = Bundle(package, fmt, variant, found)
    (folder / FILE_NAME).write_text(json.dumps(bundle.to_json(), indent=2, default=str) + "\n")


def _belongs(file: str, kernel: str) -> bool:
    """Whether a module of a package folder is one of `kernel`'s (never another kernel's with a longer name)."""
    for prefix in ("_kernel_", "_reference_", "_baseline_"):
        if file.startswith(prefix + kernel):
            rest = file[len(prefix + kernel) : -len(".py")]
            if rest == "" or re.fullmatch(r"_(cpu|cuda|rocm)(_config\d+)?", rest):
                return True
    return False


def cpp_loader(package: str) -> str:
    """kernel_agent/cpp.py, with its build cache under the package's own name."""
    text = Path(cpp.__file__).read_text()
    text = text.replace('"kernel-agent"', repr(package).replace("'", '"'))
    return (
        f"# Copied from kernel_agent/cpp.py by `kernel-agent export`; builds go to ~/.cache/{package}/builds.\n" + text
    )


def py(value: Any) -> str:
    """A Python literal with double-quoted strings (as ruff format writes them), for the rendered modules."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON's string escapes are a subset of Python's
    if isinstance(value, (list, tuple)):
        items = ", ".join(py(v) for v in value) + ("," if isinstance(value, tuple) and len(value) == 1 else "")
        return f"[{items}]" if isinstance(value, list) else f"({items})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py(k)}: {py(v)}" for k, v in value.items()) + "}"
    return repr(value)


@cache
def templates() -> jinja2.Environment:
    """Strict (an unknown name is an error, not an empty string) and unescaped (the output is
    Python, TOML, Markdown)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(py=py, tuple=tuple, add_suffix=lambda text, suffix: f"{text}{suffix}")
    return env


def render(template: str, **values: Any) -> str:
    return templates().get_template(template).render(**values)


def runtime_files() -> list[Path]:
    """Every file of runtime/ that ships (not Python's caches)."""
    return sorted(p for p in RUNTIME.iterdir() if p.is_file() and p.suffix != ".pyc")


def runtime_target(source: Path, package: str) -> str:
    """Where a runtime file goes, relative to the exported folder."""
    return RUNTIME_ELSEWHERE.get(source.name, f"{package}/_runtime/{source.name}")


def copy_runtime(out: Path, package: str) -> None:
    for source in runtime_files():
        target = out / runtime_target(source, package)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def write_files(
    out: Path, package: str, run_id: int, kernels: list[ExportedKernel], skipped: list[tuple[str, str]]
) -> None:
    """Every file of the package into `out` (an empty folder): runtime copies, rendered templates,
    the kernels' sources."""
    pkg, tests = out / package, out / "tests"
    pkg.mkdir(exist_ok=True)
    tests.mkdir(exist_ok=True)
    copy_runtime(out, package)
    values = {
        "package": package,
        "run_id": run_id,
        "kernels": kernels,
        "skipped": skipped,
        "force_env": force_variable(package),
    }
    needed = {r for k in kernels for r in get_backend(k.backend).requires}
    dependencies = ["torch>=2.0", *sorted(needed)]
    (out / "pyproject.toml").write_text(render("pyproject.toml.j2", dependencies=dependencies, **values))
    (pkg / "__init__.py").write_text(render("__init__.py.j2", **values))
    (pkg / "_cpp.py").write_text(cpp_loader(package))
    for k in kernels:
        # `_kernel_` prefix: a submodule named like the function would replace it on import.
        (pkg / f"_kernel_{k.name}.py").write_text(
            shipped(f"{k.problem}: candidate {k.candidate_id} of run {k.run_id} (exported by kernel-agent)", k.source)
        )
        (pkg / f"_reference_{k.name}.py").write_text(
            shipped(f"The reference of {k.problem} (its problem.py), exported by kernel-agent", k.reference_source)
        )
        (pkg / f"_baseline_{k.name}.py").write_text(
            shipped(f"The baseline of {k.problem} (never imported; verify-package times against it)", baseline(k))
        )
        test = "test_module.py.j2" if k.kind == "kernelbench" else "test_kernel.py.j2"
        (tests / f"test_{k.name}.py").write_text(render(test, k=k, **values))
    write_certificates(pkg, package, "pip", "pip", kernels)
    values["certificates"] = Bundle.from_json(json.loads((pkg / FILE_NAME).read_text())).certificates
    (out / "BENCHMARKS.md").write_text(render("BENCHMARKS.md.j2", rows=bench_rows(kernels), **values))
    (out / "benchmarks.csv").write_text(benchmarks_csv(kernels))
    seal(pkg, "pip")


def baseline(k: ExportedKernel) -> str:
    """The baseline as shipped: its kernel_agent.cpp imports pointed at the package's copy, like the winner's."""
    return rewrite_imports(k.baseline_source)


def _fmt(value: float | None, spec: str) -> str:
    return format(value, spec) if value is not None else ""


def against(k: ExportedKernel, kind: str) -> dict[str, str]:
    """`vs_<kind>`, its interval, and `vs_<kind>_text` (the speedup, or the reason there is none) for one row."""
    r = k.vs.get(kind)
    if r is None or r.value is None or r.ci is None:
        reason = r.reason if r is not None else "no reference point"
        return {f"vs_{kind}": "", f"vs_{kind}_ci_low": "", f"vs_{kind}_ci_high": "", f"vs_{kind}_text": f"- ({reason})"}
    return {
        f"vs_{kind}": _fmt(r.value, ".4f"),
        f"vs_{kind}_ci_low": _fmt(r.ci[0], ".4f"),
        f"vs_{kind}_ci_high": _fmt(r.ci[1], ".4f"),
        f"vs_{kind}_text": f"{r.value:.2f}x [{r.ci[0]:.2f}, {r.ci[1]:.2f}]",
    }


def bench_rows(kernels: list[ExportedKernel]) -> list[dict[str, str]]:
    return [
        {
            **against(k, "eager"),
            **against(k, "compile"),
            "loses_to": " ".join(k.loses_to()),
            "kernel": k.name,
            "problem": k.problem,
            "run": str(k.run_id),
            "candidate": str(k.candidate_id),
            "status": k.status,
            "review": k.review,
            "device": k.device,
            "device_name": k.device_name,
            "torch": str(k.environment.get("torch") or ""),
            "triton": str(k.environment.get("triton") or ""),
            "cuda": str(k.environment.get("cuda") or ""),
            "isolation": k.isolation,
            "date": k.date,
            "speedup": _fmt(k.speedup, ".4f"),
            "ci_low": _fmt(k.ci[0], ".4f"),
            "ci_high": _fmt(k.ci[1], ".4f"),
            "baseline_ms": _fmt(k.baseline_ms, ".5f"),
            "candidate_ms": _fmt(k.candidate_ms, ".5f"),
            "reverified": k.reverified,
            "record_candidate": str(k.record_candidate or ""),
            "pending": k.pending,
            "speedup_text": k.speedup_text(),
        }
        for k in kernels
    ]


def benchmarks_csv(kernels: list[ExportedKernel]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(BENCH_COLUMNS), lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(bench_rows(kernels))
    return buffer.getvalue()
