"""The files an export writes: the runtime copied byte for byte, the templates rendered into code
that imports, runs and lints."""

from __future__ import annotations

import ast
import itertools
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jinja2
import pytest
import torch

from kernel_agent.export import files

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

_names = itertools.count()
ENVIRONMENT = {"torch": "2.5.1", "triton": "", "python": "3.11.2", "kernel_agent": "0.1.0", "threads": 1}
REFERENCE = """import torch

SHAPES = [(4, 8)]

def make_inputs(shape, dtype, device, generator):
    return [torch.randn(*shape, generator=generator).to(dtype=dtype, device=device)]

def reference(x):
    return torch.softmax(x, dim=-1)
"""
KB_REFERENCE = """import torch

def get_init_inputs():
    return [8]

def get_inputs():
    return [torch.randn(2, 8)]

class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.linear(x))
"""


def kernel(name: str, **changes) -> files.ExportedKernel:
    values = dict(
        name=name,
        problem=name.replace("_", "-"),
        run_id=3,
        candidate_id=7,
        source="import torch\n\ndef kernel(x):\n    return torch.softmax(x.double(), -1).to(x.dtype)\n",
        reference_source=REFERENCE,
        backend="torch",
        verified=[("cpu", "float32")],
        tolerances={"float32": (1e-5, 1e-6)},
        speedup=1.5,
        ci=(1.4, 1.6),
        baseline_ms=0.2,
        candidate_ms=0.13,
        device="cpu",
        device_name='Test CPU "quoted"',
        isolation="none",
        environment=ENVIRONMENT,
        date="2024-01-01T00:00:00",
        status="faster",
        review="",
        reverified="3/3 checks passed",
    )
    return files.ExportedKernel(**{**values, **changes})


KB = dict(
    kind="kernelbench",
    reference_source=KB_REFERENCE,
    speedup=None,
    ci=(None, None),
    baseline_ms=None,
    candidate_ms=None,
    source=KB_REFERENCE.replace("class Model(", "class ModelNew("),
)


@pytest.fixture
def exported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """A package written by write_files with a native kernel and a KernelBench module, importable from tmp_path."""
    package = f"unit_kernels_{next(_names)}"
    out = tmp_path / "out"
    out.mkdir()
    files.write_files(
        out, package, 3, [kernel("soft_max"), kernel("kb_linear", **KB)], [("gelu", "no accepted candidate")]
    )
    monkeypatch.syspath_prepend(str(out))
    yield out, package
    for module in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[module]


def test_every_runtime_file_is_copied_byte_for_byte(exported: tuple[Path, str]) -> None:
    out, package = exported
    shipped = [p for p in files.RUNTIME.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    assert {p.name for p in shipped} >= {"__init__.py", "dispatch.py", "module.py", "checks.py"}
    for source in shipped:
        target = out / files.runtime_target(source, package)
        assert target.read_bytes() == source.read_bytes(), source
    assert (out / "tests" / "_checks.py").read_bytes() == (files.RUNTIME / "checks.py").read_bytes()
    assert sorted(p.name for p in (out / package / "_runtime").iterdir()) == sorted(
        p.name for p in shipped if p.name != "checks.py"
    )


def test_runtime_needs_nothing_but_torch() -> None:
    """An installed export must not need kernel-agent: the runtime imports the standard library,
    torch and itself only."""
    allowed = set(sys.stdlib_module_names) | {"torch"}
    for source in files.RUNTIME.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            assert {name.split(".")[0] for name in names} <= allowed, (source.name, names)


def test_rendered_package_imports_dispatches_and_forces(
    exported: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out, package = exported
    module = __import__(package)
    assert module.FORCE_ENV == f"{package.upper()}_FORCE_REFERENCE"
    assert set(module.__all__) >= {
        "soft_max",
        "kb_linear",
        "implementation",
        "last_path",
        "signature",
        "KERNELS",
        "FORCE_ENV",
    }
    assert (
        module.KERNELS["soft_max"]["tolerances"] == {"float32": (1e-5, 1e-6)}
        and module.KERNELS["kb_linear"]["kind"] == "kernelbench"
    )
    monkeypatch.delenv(module.FORCE_ENV, raising=False)
    x = torch.randn(4, 8)
    assert torch.allclose(module.soft_max(x), torch.softmax(x, -1)) and module.last_path("soft_max") == "optimized"
    module.soft_max(x.double())
    assert module.last_path("soft_max") == "reference"
    layer = module.kb_linear()
    with torch.no_grad():
        assert torch.allclose(layer(x), layer.reference(x)) and module.last_path("kb_linear") == "optimized"
    monkeypatch.setenv(module.FORCE_ENV, "1")
    module.soft_max(x)
    assert (
        module.last_path("soft_max") == "reference"
        and module.implementation("kb_linear", "cpu", "float32") == "reference"
    )
    assert "kernel_agent" not in (out / "pyproject.toml").read_text()


def test_rendered_files_are_valid_and_lint_clean(exported: tuple[Path, str]) -> None:
    out, package = exported
    project = tomllib.loads((out / "pyproject.toml").read_text())
    assert project["project"]["name"] == package.replace("_", "-") and project["project"]["dependencies"] == [
        "torch>=2.0"
    ]
    assert project["tool"]["setuptools"]["packages"] == [
        package,
        f"{package}._runtime",
    ]  # the runtime must be installed with it
    rendered = [out / package / "__init__.py", out / "tests" / "test_soft_max.py", out / "tests" / "test_kb_linear.py"]
    for path in rendered:
        compile(path.read_text(), str(path), "exec")
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed")
    proc = subprocess.run(
        [ruff, "check", "--isolated", "--no-cache", "--select", "E,F,W,B,UP", "--ignore", "E501", *map(str, rendered)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout


def test_benchmarks_name_every_kernel_and_every_reason(exported: tuple[Path, str]) -> None:
    out, _ = exported
    text = (out / "BENCHMARKS.md").read_text()
    assert '| soft_max | 3 | 7 | cpu (Test CPU "quoted") | 1.5000x | [1.4000, 1.6000] |' in text
    assert (
        "- **kb_linear** (problem `kb-linear`, run 3, candidate 7)" in text
        and "verified dtypes on cpu: float32" in text
    )
    assert text.endswith("## Not exported\n\n- **gelu**: no accepted candidate\n")
    assert (out / "benchmarks.csv").read_text().splitlines()[0] == ",".join(files.BENCH_COLUMNS)


def test_without_skipped_kernels_there_is_no_not_exported_section(tmp_path: Path) -> None:
    files.write_files(tmp_path, "pkg", 1, [kernel("soft_max")], [])
    assert "Not exported" not in (tmp_path / "BENCHMARKS.md").read_text()
    assert '"triton>=3.0"' in files.render(
        "pyproject.toml.j2", package="pkg", run_id=1, dependencies=["torch>=2.0", "triton>=3.0"]
    )


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        'say "hi"',
        "back\\slash",
        "new\nline",
        "ünï 🙂",
        ("one",),
        (),
        [("cpu", "float32")],
        {"f": (1e-5, None)},
        1.5,
        None,
        True,
    ],
)
def test_py_writes_literals_python_reads_back(value: object) -> None:
    assert ast.literal_eval(files.py(value)) == value


def test_a_missing_template_value_is_an_error() -> None:
    """StrictUndefined: a template that names a value the caller forgot fails instead of writing an
    empty string into code."""
    with pytest.raises(jinja2.UndefinedError):
        files.render("pyproject.toml.j2", package="pkg", dependencies=[])
