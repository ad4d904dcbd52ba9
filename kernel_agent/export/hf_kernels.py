"""A Hugging Face `kernels` project from a run's winners (DESIGN.md section 15): the kernel-builder layout
(`build.toml`, `torch-ext/<name>/`) and a locally assembled build (`build/torch-<backend>/` with
`metadata.json`) that `kernels.get_local_kernel` loads without the Hub or a builder.

Why one variant per device with its own table: a winner is evidence only for the device it was verified
on, so each variant's table lists that device's winners and runs the reference for every other kernel,
with the reason. C++ winners keep building at load through the package's copy of kernel_agent/cpp.py (gcc
at first use, as the pip package does): the ecosystem's builder needs a torch-binding C++ file we do not
generate, so `[kernel.*]` sections name the sources for a later builder run and the local CPU variant
does not depend on it.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_agent.core.certificate import FILE_NAME, Bundle
from kernel_agent.evaluate.backends.lint import module_string_literal
from kernel_agent.export import files
from kernel_agent.export.runtime.dispatch import force_variable
from kernel_agent.export.seal import seal
from kernel_agent.export.tuned import write_table
from kernel_agent.propose.tunables import TunableError, apply_config

BACKENDS = ("cpu", "cuda")  # always written: a device without a winner gets a variant that runs the references
METADATA = "metadata.json"
LICENSE = "other"  # the exported code is the user's; they choose its license
CPP_NOTE = (
    "C++ winners build at load with gcc (the package's `_cpp.py`), so the CPU variant needs no builder; their "
    "`[kernel.*]` sections in build.toml name the sources for kernel-builder, which would also need a torch "
    "binding that is not generated."
)


@dataclass
class TableEntry:
    """One kernel's row in one variant's table (or in the source tree's, over every device)."""

    name: str
    problem: str
    params: list[str]
    layer: str
    module: str
    modules: dict[str, str] = field(default_factory=dict)
    verified: list[list[str]] = field(default_factory=list)
    requires_env: dict[str, str] = field(default_factory=dict)
    tolerances: dict[str, tuple[float, float]] = field(default_factory=dict)
    fallback: dict[str, str] = field(default_factory=dict)
    candidates: dict[str, list[int]] = field(default_factory=dict)
    default_config: dict[str, Any] = field(default_factory=dict)
    shape_names: list[str] = field(default_factory=list)  # the tuned tables' names for a shape's sizes
    configured: dict[str, list[list[Any]]] = field(default_factory=dict)  # device -> [[config, module], ...]
    summary: str = ""
    bench_shape: tuple[int, ...] = ()
    bench_dtype: str = "float32"
    outputs: int = 0  # 0: the op returns one tensor; n: a tuple of n tensors

    @property
    def returns(self) -> str:
        """The op's return annotation, from which torch.library infers its schema."""
        return "torch.Tensor" if not self.outputs else f"tuple[{', '.join(['torch.Tensor'] * self.outputs)}]"


def backend_of(k: files.ExportedKernel) -> str:
    """The variant a winner belongs to: its device, with a CUDA device under a ROCm torch as `rocm`."""
    if k.device == "cuda" and k.environment.get("hip"):
        return "rocm"
    return k.device


def reference_params(source: str) -> list[str]:
    """The positional parameter names of `reference(...)` in a problem.py: the op's signature."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == "reference":
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return []


def signature_problem(source: str) -> str | None:
    """Why `reference(...)` cannot be a custom op's signature here (every parameter a Tensor), or None."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == "reference":
            a = node.args
            if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or not (a.posonlyargs + a.args):
                return "its reference takes defaults, *args, keywords or nothing: an op here takes tensors by position"
            return None
    return "no reference(...) function in its problem"


def output_count(reference_source: str) -> int:
    """How many tensors `reference(...)` returns (0: one tensor, not a tuple), from one call at its smallest
    check shape on the CPU: the custom op's schema declares it. The problem is the user's trusted code; one that
    cannot be called so (no shapes, no make_inputs) keeps the one-tensor schema."""
    import torch

    namespace: dict[str, Any] = {"__name__": "_kernel_agent_reference"}
    try:
        exec(compile(reference_source, "<reference>", "exec"), namespace)  # noqa: S102 - the problem, not a candidate
        pool = [*namespace.get("CHECK_SHAPES", []), *namespace.get("SHAPES", [])]  # computed lists too
        shapes = [tuple(s) if not isinstance(s, int) else (s,) for s in pool]
        smallest = min(shapes, key=lambda s: torch.Size(s).numel())
        inputs = namespace["make_inputs"](smallest, torch.float32, "cpu", torch.Generator().manual_seed(0))
        with torch.no_grad():
            out = namespace["reference"](*inputs)
    except Exception:  # noqa: BLE001 - the schema falls back to one tensor, as before this was counted
        return 0
    return len(out) if isinstance(out, (tuple, list)) else 0


def camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) or "Kernel"


def module_name(k: files.ExportedKernel) -> str:
    return f"_kernel_{k.name}_{backend_of(k)}"


def configured(k: files.ExportedKernel) -> list[tuple[dict[str, Any], str, str]]:
    """The winner's source once per config its tuned tables pick other than its own: (config, module, source).
    The package runs the one tuned for a call's shape (runtime/dispatch.py). A config whose values cannot be
    written into the source (a rewrite that renamed a tunable) is left out: those shapes run the winner as is."""
    found: list[tuple[dict[str, Any], str, str]] = []
    for table in k.tuned:
        for entry in table.configs:
            config = dict(entry.config)
            if config == dict(table.default) or any(config == seen for seen, _, _ in found):
                continue
            try:
                source = apply_config(k.source, config)
            except TunableError:
                continue
            found.append((config, f"{module_name(k)}_config{len(found)}", source))
    return found


def first_shape(reference_source: str, interpreted: bool) -> tuple[int, ...]:
    """The benchmark shape: the problem's first SHAPES entry (its first CHECK_SHAPES one under the interpreter)."""
    values = files.module_literals(reference_source, ("SHAPES", "CHECK_SHAPES"))
    pool = (values.get("CHECK_SHAPES") if interpreted else None) or values.get("SHAPES") or [(1,)]
    shape = pool[-1] if interpreted else pool[0]
    return tuple(shape) if not isinstance(shape, int) else (shape,)


def entries(winners: dict[str, list[files.ExportedKernel]], backends: list[str] | None) -> list[TableEntry]:
    """Table rows for the given backends (None: every backend, the source tree's union)."""
    rows = []
    for name, found in sorted(winners.items()):
        first = found[0]
        row = TableEntry(
            name=name,
            problem=first.problem,
            params=reference_params(first.reference_source),
            layer=camel(name),
            module=f"_reference_{name}",
            outputs=output_count(first.reference_source),
        )
        for backend in backends or sorted({backend_of(k) for k in found} | set(BACKENDS)):
            k = next((w for w in found if backend_of(w) == backend), None)
            if k is None:
                row.fallback[backend] = f"no winner verified on {backend} in run(s) {sorted({w.run_id for w in found})}"
                continue
            row.modules[k.device] = module_name(k)
            if row.module.startswith("_reference_"):
                row.module = module_name(k)
            row.verified += [list(pair) for pair in k.verified]
            row.tolerances.update(k.tolerances)
            row.candidates[backend] = [k.run_id, k.candidate_id]
            if k.interpreted:
                row.requires_env["TRITON_INTERPRET"] = "1"
            if k.tuned:
                row.default_config = dict(k.tuned[0].default)
                row.shape_names = list(files.shape_names(first.reference_source))
                row.configured[k.device] = [[config, module] for config, module, _ in configured(k)]
        timed = [k for k in found if k.speedup_text() and (backends is None or backend_of(k) in backends)]
        row.summary = ", ".join(f"{_short(k)} on {k.device_name}" for k in timed) or "reference only here"
        shown = next((k for k in found if backends is None or backend_of(k) in backends), first)
        row.bench_shape = first_shape(first.reference_source, shown.interpreted)
        row.bench_dtype = shown.verified[0][1] if shown.verified else "float32"
        if not row.tolerances:
            row.tolerances = dict(first.tolerances)
        rows.append(row)
    return rows


def _short(k: files.ExportedKernel) -> str:
    """`1.48x` (the number of record), or `re-timing` while it is withheld."""
    return k.pending or f"{k.speedup:.2f}x"


def namespace(package: str, label: str, winners: dict[str, list[files.ExportedKernel]]) -> str:
    """`_<package>_<label>_<8 hex>`: unique per build content, so two builds load in one process."""
    key = json.dumps([label, sorted((k.name, k.run_id, k.candidate_id) for found in winners.values() for k in found)])
    return f"_{package}_{label}_{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def write_tree(
    folder: Path,
    package: str,
    run_ids: list[int],
    winners: dict[str, list[files.ExportedKernel]],
    backends: list[str] | None,
    ns: str,
) -> list[TableEntry]:
    """One importable package: the table, ops, layers, kernels (those of `backends`), references, runtime, tuned."""
    folder.mkdir(parents=True, exist_ok=True)
    runtime = folder / "_runtime"
    runtime.mkdir(exist_ok=True)
    for source in files.runtime_files():
        if source.name not in files.RUNTIME_ELSEWHERE:
            shutil.copyfile(source, runtime / source.name)
    (folder / "_cpp.py").write_text(files.cpp_loader(package))
    table = entries(winners, backends)
    where = f"the {', '.join(backends)} variant" if backends else "the source tree (every device)"
    values = {
        "package": package,
        "run_ids": run_ids,
        "table": table,
        "namespace": ns,
        "where": where,
        "force_env": force_variable(package),
    }
    (folder / "__init__.py").write_text(files.render("hf/__init__.py.j2", **values))
    (folder / "_ops.py").write_text(files.render("hf/_ops.py.j2", **values))
    (folder / "layers.py").write_text(files.render("hf/layers.py.j2", **values))
    for name, found in winners.items():
        (folder / f"_reference_{name}.py").write_text(
            f"# The reference of {found[0].problem} (its problem.py), exported by kernel-agent\n"
            + found[0].reference_source
        )
        for k in found:
            if backends is not None and backend_of(k) not in backends:
                continue
            if backends is not None:  # a variant: what verify-package times the winner against again
                (folder / f"_baseline_{name}.py").write_text(
                    files.shipped(
                        f"The baseline of {k.problem} (never imported; verify-package times against it)",
                        files.baseline(k),
                    )
                )
            (folder / f"{module_name(k)}.py").write_text(
                f"# {k.problem}: candidate {k.candidate_id} of run {k.run_id} on {k.device}, exported by kernel-agent\n"
                + k.source
            )
            for tuned in k.tuned:
                write_table(folder / "tuned", k.name, tuned)
            for config, module, source in configured(k):
                (folder / f"{module}.py").write_text(
                    f"# {k.problem}: candidate {k.candidate_id} of run {k.run_id} with its tuned config {config}, "
                    f"exported by kernel-agent\n" + source
                )
    return table


def digest(variant: Path) -> dict[str, str]:
    """sha256 (base64) of every file in a variant, by relative path, without metadata.json and caches: what
    `kernels`' Digest.hash_variant computes, so its validate() can check the files against metadata.json."""
    found = {}
    for path in sorted(variant.rglob("*")):
        relative = path.relative_to(variant)
        if not path.is_file() or relative.as_posix() == METADATA or "__pycache__" in relative.parts:
            continue
        found[relative.as_posix()] = base64.b64encode(hashlib.sha256(path.read_bytes()).digest()).decode()
    return found


def repository_commit() -> tuple[str, bool]:
    """kernel-agent's own git commit and whether its tree had changes ('' when it is not a checkout)."""
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "", False
    return commit, bool(dirty)


def provenance(run_ids: list[int], winners: dict[str, list[files.ExportedKernel]]) -> dict[str, Any]:
    from kernel_agent import __version__

    commit, dirty = repository_commit()
    return {
        "runs": run_ids,
        "candidates": {
            name: [
                {
                    "device": k.device,
                    "run": k.run_id,
                    "candidate": k.candidate_id,
                    "record_candidate": k.record_candidate,  # whose evaluation the speedup is (a re-timing)
                    "speedup": k.speedup,
                    "speedup_ci": list(k.ci) if k.speedup is not None else None,
                    "pending": k.pending or None,
                }
                for k in found
            ]
            for name, found in sorted(winners.items())
        },
        "kernel_agent_version": __version__,
        "commit": commit,
        "dirty": dirty,
    }


def metadata(repo_name: str, backend: str, ns: str, origin: dict[str, Any]) -> dict[str, Any]:
    """A variant's metadata.json less its digest list (which the certificate file's seal must come before)."""
    return {
        "id": ns,
        "name": repo_name,
        "version": 1,
        "license": LICENSE,
        "python-depends": [],
        "backend": {"type": backend},
        "kernel-agent": origin,
    }


def write_metadata(variant: Path, values: dict[str, Any]) -> None:
    found = {**values, "digest": {"algorithm": "sha256", "files": digest(variant)}}
    (variant / METADATA).write_text(json.dumps(found, indent=2) + "\n")


def compiled_sections(winners: dict[str, list[files.ExportedKernel]], root: Path) -> list[dict[str, Any]]:
    """`[kernel.*]` sections for compiled winners: their C++ (the CPP_SOURCE literal) under csrc/."""
    sections = []
    for found in winners.values():
        for k in found:
            source = cpp_source(k.source) if k.backend == "cpp" else None
            if source is None:
                continue
            relative = f"csrc/{k.name}_{backend_of(k)}.cpp"
            (root / relative).parent.mkdir(exist_ok=True)
            (root / relative).write_text(source)
            note = f"{k.problem}: candidate {k.candidate_id} of run {k.run_id}; locally built at load by _cpp.py"
            sections.append(
                {"name": f"{k.name}_{backend_of(k)}", "backend": backend_of(k), "src": [relative], "note": note}
            )
    return sections


def cpp_source(source: str) -> str | None:
    """The module-level CPP_SOURCE string literal of a C++ winner, if it has one (the backend's own lint rule)."""
    return module_string_literal(ast.parse(source), "CPP_SOURCE")


def write_project(
    out: Path,
    package: str,
    run_ids: list[int],
    kernels: list[files.ExportedKernel],
    skipped: list[tuple[str, str]],
    notify: Callable[[str], None],
) -> None:
    """Every file of the project into `out` (an empty folder, the marker written)."""
    repo_name = package.replace("_", "-")
    unfit = {
        k.name: "a KernelBench module winner: --format hf-kernels ships native kernels only; use --format pip"
        if k.kind != "native"
        else signature_problem(k.reference_source)
        for k in kernels
    }
    native = [k for k in kernels if unfit[k.name] is None]
    skipped = skipped + sorted({(name, f"not an hf-kernels op: {why}") for name, why in unfit.items() if why})
    winners: dict[str, list[files.ExportedKernel]] = {}
    for k in native:
        winners.setdefault(k.name, []).append(k)
    backends = sorted(set(BACKENDS) | {backend_of(k) for k in native})
    write_tree(out / "torch-ext" / package, package, run_ids, winners, None, namespace(package, "src", winners))
    origin = provenance(run_ids, winners)
    variants = []
    for backend in backends:
        ns = namespace(package, backend, winners)
        variant = out / "build" / f"torch-{backend}"
        table = write_tree(variant, package, run_ids, winners, [backend], ns)
        here = [k for k in native if backend_of(k) == backend]
        files.write_certificates(variant, package, "hf-kernels", backend, here)
        meta = metadata(repo_name, backend, ns, origin)
        seal(variant, "hf-kernels", meta)
        write_metadata(variant, meta)
        missing = sorted(e.name for e in table if backend in e.fallback)
        if missing:
            notify(
                f"build/torch-{backend}: no winner verified on {backend} for {', '.join(missing)}; "
                "it runs their references"
            )
        variants.append(
            {
                "backend": backend,
                "rows": [
                    {
                        "name": e.name,
                        "implementation": "reference"
                        if backend in e.fallback
                        else "optimized" + (" (under TRITON_INTERPRET=1 only)" if e.requires_env else ""),
                        "provenance": e.fallback.get(backend) or "run {}, candidate {}".format(*e.candidates[backend]),
                    }
                    for e in table
                ],
            }
        )
    tests, benches = out / "tests", out / "benchmarks"
    tests.mkdir()
    benches.mkdir()
    shutil.copyfile(files.RUNTIME / "checks.py", tests / "_checks.py")
    table = entries(winners, None)
    required = {name: value for e in table for name, value in e.requires_env.items()}
    values = {
        "package": package,
        "repo_name": repo_name,
        "run_ids": run_ids,
        "table": table,
        "kernels": native,
        "skipped": skipped,
        "license": LICENSE,
        "backends": backends,
        "force_env": force_variable(package),
        "required_env": required,
        "variants": variants,
        "rows": files.bench_rows(native),
        "provenance": origin,
        "cpp_note": CPP_NOTE,
        "compiled": compiled_sections(winners, out),
    }
    (out / "build.toml").write_text(files.render("hf/build.toml.j2", **values))
    (tests / f"test_{package}.py").write_text(files.render("hf/test_ops.py.j2", **values))
    (benches / f"benchmark_{package}.py").write_text(files.render("hf/benchmark.py.j2", **values))
    values["certificates"] = [
        c
        for backend in backends
        for c in Bundle.from_json(json.loads((out / "build" / f"torch-{backend}" / FILE_NAME).read_text())).certificates
    ]
    (out / "CARD.md").write_text(files.render("hf/CARD.md.j2", **values))
    (out / "BENCHMARKS.md").write_text(files.render("hf/BENCHMARKS.md.j2", **values))
    (out / "benchmarks.csv").write_text(files.benchmarks_csv(native))
