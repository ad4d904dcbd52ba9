"""The hf-kernels project in-process: per-device variants, custom ops under torch.compile, tuned tables, digest.

Variants are imported the way `kernels.get_local_kernel` imports them (the variant folder as a package named by
its metadata id), so these tests need neither the `kernels` package nor a subprocess; tests/e2e/test_hf_export.py
loads the same layout through the real `kernels`.
"""

from __future__ import annotations

import ast
import csv
import importlib.util
import io
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

from kernel_agent.core.relative import Relative, missing
from kernel_agent.export import files, hf_kernels
from kernel_agent.export.package import losses
from kernel_agent.export.runtime import tuned as runtime_tuned
from kernel_agent.export.tuned import TunedConfig, TunedTable
from unit.export.test_package_files import kernel as pip_kernel

_names = itertools.count()
REFERENCE = """import torch

SHAPES = [(4, 8)]
CHECK_SHAPES = [(1, 1)]

def make_inputs(shape, dtype, device, generator):
    return [torch.randn(*shape, generator=generator).to(dtype=dtype, device=device)]

def reference(x):
    return torch.softmax(x, dim=-1)
"""
TWO_INPUTS = REFERENCE.replace(
    "def reference(x):\n    return torch.softmax(x, dim=-1)", "def reference(a, b):\n    return a * b + a"
).replace(
    "return [torch.randn(",
    "return [torch.randn(*shape, generator=generator).to(dtype=dtype, device=device), torch.randn(",
)
CALLS = "CALLS = []\n\n"
# An op of two outputs: a row softmax and its log-sum-exp (the schema must declare a tuple).
SOFTMAX_LSE = REFERENCE.replace(
    "def reference(x):\n    return torch.softmax(x, dim=-1)",
    "def reference(x):\n    return torch.softmax(x, dim=-1), torch.logsumexp(x, dim=-1)",
)


def kernel(name: str, **changes) -> files.ExportedKernel:
    """The pip format's test record (test_package_files.kernel), with a source that counts its calls and the
    reference points the hf CARD shows."""
    return pip_kernel(
        name,
        **{
            "problem": name,
            "source": "import torch\n"
            + CALLS
            + "def kernel(x):\n    CALLS.append(1)\n    return torch.softmax(x.double(), -1).to(x.dtype)\n",
            "reference_source": REFERENCE,
            "device_name": "Test CPU (2 cores)",
            "date": "2026-12-01T00:00:00",
            "vs": {"eager": Relative(1.2, (1.1, 1.3)), "compile": Relative(0.5, (0.4, 0.6))},
            **changes,
        },
    )


TABLE = TunedTable(
    device_name="Test CPU (2 cores)",
    default={"BLOCK": 64},
    configs=[
        TunedConfig({"rows": 128, "cols": 128}, {"BLOCK": 16}),
        TunedConfig({"rows": 4096, "cols": 4096}, {"BLOCK": 512}),
    ],
)


def load_variant(variant: Path) -> ModuleType:
    """What kernels' importer does: the variant folder's __init__.py as a package named by metadata.json's id."""
    name = json.loads((variant / "metadata.json").read_text())["id"]
    spec = importlib.util.spec_from_file_location(name, variant / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def project(tmp_path: Path) -> Iterator[tuple[Path, str, list[str]]]:
    """A project with a CPU winner (tuned), a second op of two inputs, and a winner verified only on CUDA."""
    package = f"hf_unit_{next(_names)}"
    out = tmp_path / "out"
    out.mkdir()
    notes: list[str] = []
    cpu_winner = kernel("soft_max", tuned=[TABLE])
    mul = kernel(
        "mul_add",
        reference_source=TWO_INPUTS,
        source="def kernel(a, b):\n    return a * b + a\n",
        vs={"eager": missing("no reference point"), "compile": missing("no reference point")},
    )
    two_outputs = kernel(
        "softmax_lse",
        reference_source=SOFTMAX_LSE,
        source="import torch\n\ndef kernel(x):\n    return [torch.softmax(x, -1), torch.logsumexp(x, -1)]\n",
    )
    cuda_only = kernel(
        "gpu_only", device="cuda", verified=[("cuda", "float32")], device_name="Fake GPU", candidate_id=9
    )
    hf_kernels.write_project(
        out,
        package,
        [3, 4],
        [cpu_winner, mul, two_outputs, cuda_only],
        [("gelu", "no accepted candidate")],
        notes.append,
    )
    yield out, package, notes
    for module in [m for m in sys.modules if m.startswith(f"_{package}_")]:
        del sys.modules[module]


def test_layout_has_the_format_files(project: tuple[Path, str, list[str]]) -> None:
    out, package, _ = project
    for relative in ("build.toml", "CARD.md", f"torch-ext/{package}/__init__.py", f"torch-ext/{package}/layers.py"):
        assert (out / relative).is_file(), relative
    assert sorted(p.name for p in (out / "build").iterdir()) == ["torch-cpu", "torch-cuda"]
    assert (out / "tests" / f"test_{package}.py").is_file() and (
        out / "benchmarks" / f"benchmark_{package}.py"
    ).is_file()
    build = (out / "build.toml").read_text()
    assert "[torch-noarch]" in build and 'backends = ["cpu", "cuda"]' in build
    for path in out.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")  # every rendered module is valid Python


def test_variants_import_their_own_modules_relatively_and_never_kernel_agent(
    project: tuple[Path, str, list[str]],
) -> None:
    """The format's rules for a loadable variant: relative imports only (it loads under its metadata id, not its
    name), and nothing of the exporter (it must load where kernel-agent is not installed)."""
    out, package, _ = project
    for variant in [*(out / "build").iterdir(), out / "torch-ext" / package]:
        own = {p.stem for p in variant.iterdir()} | {package, "kernel_agent"}
        for path in variant.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    roots = {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    roots = {(node.module or "").split(".")[0]}
                else:
                    continue
                assert not roots & own, (path, roots)


def test_each_variant_holds_only_its_own_devices_winners(project: tuple[Path, str, list[str]]) -> None:
    out, package, notes = project
    cpu, cuda = out / "build" / "torch-cpu", out / "build" / "torch-cuda"
    assert (cpu / "_kernel_soft_max_cpu.py").exists() and not (cpu / "_kernel_gpu_only_cuda.py").exists()
    assert (cuda / "_kernel_gpu_only_cuda.py").exists() and not (cuda / "_kernel_soft_max_cpu.py").exists()
    assert any("build/torch-cuda: no winner verified on cuda for mul_add, soft_max, softmax_lse" in n for n in notes), (
        notes
    )
    assert any("build/torch-cpu: no winner verified on cpu for gpu_only" in n for n in notes), notes
    module = load_variant(cuda)
    assert module.KERNELS["soft_max"]["fallback"]["cuda"].startswith("no winner verified on cuda")
    assert module.implementation("soft_max", "cuda", "float32") == "reference"
    assert module.implementation("gpu_only", "cuda", "float32") == "optimized"


def test_ops_dispatch_and_trace_under_compile_fullgraph(project: tuple[Path, str, list[str]]) -> None:
    out, _, _ = project
    module = load_variant(out / "build" / "torch-cpu")
    x, b = torch.randn(4, 8), torch.randn(4, 8)
    assert torch.allclose(module.soft_max(x), torch.softmax(x, -1), atol=1e-6)
    assert module.last_path("soft_max") == "optimized"
    module.gpu_only(x)
    assert module.last_path("gpu_only") == "reference"  # verified on cuda only: the CPU variant runs the reference
    assert hasattr(getattr(torch.ops, module.NAMESPACE), "soft_max")

    def both(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return module.soft_max(x) + module.mul_add(x, b) + module.layers.SoftMax()(x)

    torch._dynamo.reset()
    compiled = torch.compile(both, fullgraph=True, backend="aot_eager")  # a graph break raises here
    assert torch.allclose(compiled(x, b), both(x, b), atol=1e-6)
    calls = sys.modules[f"{module.__name__}._kernel_soft_max_cpu"].CALLS
    assert len(calls) >= 3  # the compiled graph called the optimized kernel, not only the fake


def test_an_op_of_two_outputs_returns_a_tuple_and_traces_under_compile_fullgraph(
    project: tuple[Path, str, list[str]],
) -> None:
    """The schema is inferred from the return annotation: a reference returning two tensors makes an op of
    two outputs (a kernel returning a list is handed back as the tuple the schema declares)."""
    out, _, _ = project
    module = load_variant(out / "build" / "torch-cpu")
    x = torch.randn(4, 8)
    got = module.softmax_lse(x)
    assert isinstance(got, tuple) and len(got) == 2 and module.last_path("softmax_lse") == "optimized"
    assert torch.allclose(got[0], torch.softmax(x, -1)) and torch.allclose(got[1], torch.logsumexp(x, -1))
    schema = str(getattr(torch.ops, module.NAMESPACE).softmax_lse.default._schema)
    assert schema.endswith("-> (Tensor, Tensor)"), schema

    def use(x: torch.Tensor) -> torch.Tensor:
        y, lse = module.layers.SoftmaxLse()(x)
        return y.sum(-1) + lse

    torch._dynamo.reset()
    compiled = torch.compile(use, fullgraph=True, backend="aot_eager")
    assert torch.allclose(compiled(x), use(x), atol=1e-6)


def test_tuned_table_ships_per_device_and_nearest_shape_wins(project: tuple[Path, str, list[str]]) -> None:
    out, _, _ = project
    variant = out / "build" / "torch-cpu"
    path = variant / "tuned" / "soft_max_test_cpu_2_cores.json"
    assert json.loads(path.read_text())["configs"][0] == {"shape": {"rows": 128, "cols": 128}, "config": {"BLOCK": 16}}
    folder = variant / "tuned"
    assert runtime_tuned.config_for(folder, "soft_max", "Test CPU (2 cores)", {"rows": 100, "cols": 200}, {}) == {
        "BLOCK": 16
    }
    assert runtime_tuned.config_for(folder, "soft_max", "Test CPU (2 cores)", {"rows": 3000, "cols": 8192}, {}) == {
        "BLOCK": 512
    }
    # another machine has no file of its own: the default
    assert runtime_tuned.config_for(folder, "soft_max", "Other CPU", {"rows": 100}, {"BLOCK": 64}) == {"BLOCK": 64}
    module = load_variant(variant)
    assert module.KERNELS["soft_max"]["default_config"] == {"BLOCK": 64}
    assert module.tuned_config("soft_max", {"rows": 1, "cols": 1}) in ({"BLOCK": 16}, {"BLOCK": 64})


def test_metadata_digest_covers_every_file(project: tuple[Path, str, list[str]]) -> None:
    out, _, _ = project
    variant = out / "build" / "torch-cpu"
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "cpu"} and metadata["name"] == metadata["name"].replace("_", "-")
    assert metadata["digest"]["files"] == hf_kernels.digest(variant)
    assert {"__init__.py", "_ops.py", "layers.py", "_runtime/dispatch.py"} <= set(metadata["digest"]["files"])
    assert metadata["kernel-agent"]["runs"] == [3, 4]
    assert metadata["kernel-agent"]["candidates"]["gpu_only"] == [
        {
            "device": "cuda",
            "run": 3,
            "candidate": 9,
            "record_candidate": None,
            "speedup": 1.5,
            "speedup_ci": [1.4, 1.6],
            "pending": None,
        }
    ]
    (variant / "layers.py").write_text("# changed\n")
    assert hf_kernels.digest(variant) != metadata["digest"]["files"]


def test_card_and_csv_carry_eager_and_compile_and_warn_on_a_loss(project: tuple[Path, str, list[str]]) -> None:
    out, _, _ = project
    card = (out / "CARD.md").read_text()
    assert "1.20x [1.10, 1.30]" in card and "0.50x [0.40, 0.60]" in card
    assert "Warning: soft_max loses to torch compile" in card
    assert "- (no reference point)" in card and "**gelu**: no accepted candidate" in card
    rows = list(csv.DictReader(io.StringIO((out / "benchmarks.csv").read_text())))
    soft = next(r for r in rows if r["kernel"] == "soft_max")
    assert (soft["vs_eager"], soft["vs_compile_ci_high"], soft["loses_to"]) == ("1.2000", "0.6000", "compile")
    assert losses(kernel("soft_max")) == [
        "soft_max loses to torch compile on cpu (Test CPU (2 cores)): 0.50x [0.40, 0.60]; torch compile is faster there"
    ]


def test_pip_benchmarks_gain_eager_and_compile_columns(tmp_path: Path) -> None:
    out = tmp_path / "pip"
    out.mkdir()
    files.write_files(out, "pip_unit", 3, [kernel("soft_max")], [])
    text = (out / "BENCHMARKS.md").read_text()
    assert "| vs eager | vs compile |" in text and "Warning: soft_max loses to torch compile" in text
    header = (out / "benchmarks.csv").read_text().splitlines()[0].split(",")
    assert {"vs_eager", "vs_eager_ci_low", "vs_compile", "vs_compile_ci_high", "loses_to"} <= set(header)


def test_a_reference_with_defaults_or_a_kernelbench_module_is_left_out_with_the_reason(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    scaled = kernel("scaled", reference_source=REFERENCE.replace("def reference(x):", "def reference(x, scale=2.0):"))
    module = kernel("kb", kind="kernelbench")
    hf_kernels.write_project(out, "hf_left_out", [3], [kernel("soft_max"), scaled, module], [], lambda m: None)
    card = (out / "CARD.md").read_text()
    assert "**scaled**: not an hf-kernels op: its reference takes defaults" in card
    assert "**kb**: not an hf-kernels op: a KernelBench module winner" in card
    assert not (out / "build" / "torch-cpu" / "_kernel_scaled_cpu.py").exists()


def test_nearest_shape_uses_log_distance_and_falls_back_to_the_default() -> None:
    entries = [{"shape": {"n": 64}, "config": {"B": 1}}, {"shape": {"n": 4096}, "config": {"B": 2}}]
    assert runtime_tuned.nearest(entries, {"n": 500}, {"B": 0}) == {"B": 1}  # log2: 500 is nearer 64 than 4096
    assert runtime_tuned.nearest(entries, {"n": 600}, {"B": 0}) == {"B": 2}
    assert runtime_tuned.nearest(entries, {"m": 600}, {"B": 0}) == {"B": 0}  # no shared size
    assert runtime_tuned.slug("NVIDIA H100 80GB HBM3") == "nvidia_h100_80gb_hbm3"


def test_the_output_count_reads_computed_shapes_and_falls_back_to_one_tensor() -> None:
    """SHAPES may be computed (`1 << 22`, as cpp_adamw's and triton_gelu's are): the count runs the module, not
    its literals. A reference that cannot be called so keeps the one-tensor schema instead of failing the export."""
    three = SOFTMAX_LSE.replace("SHAPES = [(4, 8)]", "SHAPES = [(1 << 2, 8)]").replace(
        "torch.logsumexp(x, dim=-1)", "torch.logsumexp(x, dim=-1), x.amax(-1)"
    )
    assert hf_kernels.output_count(three) == 3
    assert hf_kernels.output_count(SOFTMAX_LSE) == 2
    assert hf_kernels.output_count(REFERENCE) == 0
    assert hf_kernels.output_count(REFERENCE.replace("SHAPES = [(4, 8)]\nCHECK_SHAPES = [(1, 1)]\n", "")) == 0
