"""The texts of an exported package's generated files (registry, tests, pyproject, benchmarks).

Kept apart from export.py so the choice of winners and the re-verification
read on their own; everything here is pure string formatting.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_agent import cpp


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
    kind: str = "native"  # "native": a kernel(*inputs) function; "kernelbench": an nn.Module ModelNew with the reference's weights
    extra: dict[str, Any] = field(default_factory=dict)


BENCH_COLUMNS = ("kernel", "problem", "run", "candidate", "status", "review", "device", "device_name", "torch", "triton", "cuda", "isolation",
                 "date", "speedup", "ci_low", "ci_high", "baseline_ms", "candidate_ms", "reverified")


def identifier(name: str) -> str:
    """A problem name as a Python identifier (`cpp-softmax` -> `cpp_softmax`, `1x` -> `k_1x`)."""
    ident = re.sub(r"\W", "_", name)
    return f"k_{ident}" if not ident or ident[0].isdigit() else ident


def rewrite_imports(source: str) -> str:
    """Point `kernel_agent.cpp` imports at the package's own copy of the loader."""
    source = re.sub(r"^(\s*)from\s+kernel_agent\.cpp\s+import\s", r"\1from ._cpp import ", source, flags=re.M)
    return re.sub(r"^(\s*)import\s+kernel_agent\.cpp\s+as\s+(\w+)", r"\1from . import _cpp as \2", source, flags=re.M)


def cpp_loader(package: str) -> str:
    """kernel_agent/cpp.py, with its build cache under the package's own name."""
    text = Path(cpp.__file__).read_text()
    text = text.replace('"kernel-agent"', repr(package).replace("'", '"'))
    return f'# Copied from kernel_agent/cpp.py by `kernel-agent export`; builds go to ~/.cache/{package}/builds.\n' + text


def pyproject(package: str, kernels: list[ExportedKernel], run_id: int) -> str:
    deps = ['"torch>=2.0"']
    if any(k.backend == "triton" for k in kernels):
        deps.append('"triton>=3.0"')
    return f"""[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{package.replace('_', '-')}"
version = "0.1.0"
description = "Kernels exported by kernel-agent from run {run_id}, each verified against its reference."
requires-python = ">=3.10"
dependencies = [{", ".join(deps)}]

[project.optional-dependencies]
test = ["pytest>=7"]

[tool.setuptools]
packages = ["{package}"]

[tool.pytest.ini_options]
testpaths = ["tests"]
"""


def registry(package: str, kernels: list[ExportedKernel], run_id: int) -> str:
    env = f"{package.upper()}_FORCE_REFERENCE"
    table = {
        k.name: {"module": f"_kernel_{k.name}", "reference": f"_reference_{k.name}", "problem": k.problem, "run": k.run_id, "candidate": k.candidate_id,
                 "verified": [list(v) for v in k.verified], "speedup": k.speedup, "kind": k.kind}
        for k in kernels
    }
    functions = "\n\n".join(_entry_function(k) for k in kernels)
    return f'''"""{package}: kernels exported by kernel-agent from run {run_id}.

Each function runs the optimized kernel only for a (device, dtype) it was
verified on and falls back to the reference everywhere else; set
{env}=1 to force the reference. `implementation()` says which path a call takes,
`last_path()` which one the last call took.
"""

from __future__ import annotations

import importlib
import os

import torch

FORCE_ENV = "{env}"
KERNELS = {table!r}
_LAST: dict[str, str] = {{}}


def forced_reference() -> bool:
    return os.environ.get(FORCE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def signature(inputs) -> tuple[str, str]:
    """(device type, dtype name) of the first floating tensor input (else the first tensor)."""
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    chosen = next((t for t in tensors if t.is_floating_point()), tensors[0] if tensors else None)
    if chosen is None:
        return "cpu", ""
    return chosen.device.type, str(chosen.dtype).removeprefix("torch.")


def implementation(kernel: str, device: str, dtype: str) -> str:
    """"optimized" when (device, dtype) was verified for this kernel and the reference is not forced, else "reference"."""
    spec = KERNELS[kernel]
    if forced_reference():
        return "reference"
    return "optimized" if [device, dtype] in spec["verified"] else "reference"


def last_path(kernel: str) -> str | None:
    """The path ("optimized" or "reference") the last call of `kernel` took, or None before any call."""
    return _LAST.get(kernel)


def _call(kernel: str, inputs: tuple):
    spec = KERNELS[kernel]
    path = implementation(kernel, *signature(inputs))
    if path == "optimized":
        function = importlib.import_module(f"{{__name__}}.{{spec['module']}}").kernel
    else:
        function = importlib.import_module(f"{{__name__}}.{{spec['reference']}}").reference
    _LAST[kernel] = path
    return function(*inputs)


class DispatchModule(torch.nn.Module):
    """A KernelBench winner: the reference `Model` and the optimized `ModelNew` holding the same weights.

    Each call runs `optimized` for a (device, dtype) it was verified on (in eval mode, like the
    verification) and `reference` elsewhere. The weights live in `reference`; `load_state_dict`
    takes a reference state dict and copies it into `optimized`; call `sync_weights()` after
    changing the reference's parameters any other way. Both copies are kept, so parameters use
    twice the memory.
    """

    def __init__(self, kernel: str, reference: torch.nn.Module, optimized: torch.nn.Module) -> None:
        super().__init__()
        self.kernel = kernel
        self.reference = reference
        self.optimized = optimized
        self.sync_weights()

    def sync_weights(self) -> None:
        self.optimized.load_state_dict(self.reference.state_dict(), strict=True)

    def state_dict(self, *args, **kwargs):
        return self.reference.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, **kwargs):
        result = self.reference.load_state_dict(state_dict, strict=strict, **kwargs)
        self.sync_weights()
        return result

    def forward(self, *inputs):
        path = implementation(self.kernel, *signature(inputs))
        _LAST[self.kernel] = path
        return (self.optimized if path == "optimized" else self.reference)(*inputs)


def _module(kernel: str, init_inputs: tuple) -> DispatchModule:
    spec = KERNELS[kernel]
    reference = importlib.import_module(f"{{__name__}}.{{spec['reference']}}")
    optimized = importlib.import_module(f"{{__name__}}.{{spec['module']}}")
    args = list(init_inputs) if init_inputs else list(reference.get_init_inputs())
    return DispatchModule(kernel, reference.Model(*args).eval(), optimized.ModelNew(*args).eval())


{functions}

__all__ = ["KERNELS", "FORCE_ENV", "implementation", "last_path", {", ".join(repr(k.name) for k in kernels)}]
'''


def _entry_function(k: ExportedKernel) -> str:
    measured = f" ({k.speedup:.2f}x on {k.device_name})" if k.speedup else ""
    if k.kind == "kernelbench":
        return (f'def {k.name}(*init_inputs) -> DispatchModule:\n    """{k.problem}: a module like its `Model(*init_inputs)` (default: the problem\'s '
                f'get_init_inputs()), running ModelNew, candidate {k.candidate_id} of run {k.run_id}{measured}, where it was verified."""\n'
                f'    return _module("{k.name}", init_inputs)\n')
    return f'def {k.name}(*inputs):\n    """{k.problem}: candidate {k.candidate_id} of run {k.run_id}{measured}."""\n    return _call("{k.name}", inputs)\n'


def checks_module() -> str:
    """`tests/_checks.py` of the package: the comparison every generated test makes."""
    return '''"""Shared by the generated tests: an output against its float64 reference (exported by kernel-agent)."""

import torch


def outputs(value):
    return (value,) if isinstance(value, torch.Tensor) else tuple(value)


def available(device):
    return device == "cpu" or (device == "cuda" and torch.cuda.is_available())


def assert_matches(got, gold, base, rtol, atol):
    """`got` against the float64 `gold` within the tolerances; shape, dtype and device as the reference's own `base`."""
    assert len(got) == len(base)
    for out, expected, same_dtype in zip(got, gold, base):
        assert out.shape == same_dtype.shape and out.dtype == same_dtype.dtype and out.device == same_dtype.device
        torch.testing.assert_close(out.double(), expected.double(), rtol=rtol, atol=atol)
'''


def _test_preamble(package: str, kernel: ExportedKernel, what: str, imports: str) -> str:
    return f'''"""{package}.{kernel.name} {what}, with the tolerances of run {kernel.run_id}."""

{imports}
import pytest
import torch
from _checks import assert_matches, available, outputs

import {package}
from {package} import _reference_{kernel.name} as ref

KERNEL = "{kernel.name}"
VERIFIED = {[tuple(v) for v in kernel.verified]!r}
TOLERANCES = {kernel.tolerances!r}  # dtype -> (rtol, atol) against the float64 reference
'''


def module_test(package: str, kernel: ExportedKernel) -> str:
    """Tests of an exported KernelBench module against its reference Model, on fresh inputs and fresh weights."""
    env = f"{package.upper()}_FORCE_REFERENCE"
    return _test_preamble(package, kernel, "(a KernelBench module) against its reference Model", "import copy\nimport secrets\n") + f'''

def check(module, device, dtype):
    inputs = [t.to(device) if isinstance(t, torch.Tensor) else t for t in ref.get_inputs()]
    assert {package}.implementation(KERNEL, *{package}.signature(inputs)) == "optimized"
    with torch.no_grad():
        got = outputs(module(*inputs))
        assert {package}.last_path(KERNEL) == "optimized"
        gold = outputs(copy.deepcopy(module.reference).double()(*[t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t for t in inputs]))
        base = outputs(module.reference(*inputs))
    assert_matches(got, gold, base, *TOLERANCES[dtype])


@pytest.mark.parametrize("device,dtype", VERIFIED)
@pytest.mark.parametrize("repeat", range(3))
def test_matches_reference(device, dtype, repeat, monkeypatch):
    if not available(device):
        pytest.skip(f"no {{device}} device here")
    monkeypatch.delenv("{env}", raising=False)
    torch.manual_seed(secrets.randbits(62))  # fresh weights (Model's init) and fresh inputs (get_inputs)
    check({package}.{kernel.name}().to(device), device, dtype)


@pytest.mark.parametrize("device,dtype", VERIFIED)
def test_loaded_weights_reach_the_optimized_module(device, dtype, monkeypatch):
    if not available(device):
        pytest.skip(f"no {{device}} device here")
    monkeypatch.delenv("{env}", raising=False)
    module = {package}.{kernel.name}().to(device)
    torch.manual_seed(secrets.randbits(62))
    other = ref.Model(*ref.get_init_inputs()).to(device)
    module.load_state_dict(other.state_dict())
    check(module, device, dtype)


def test_force_reference(monkeypatch):
    monkeypatch.setenv("{env}", "1")
    module = {package}.{kernel.name}()
    with torch.no_grad():
        module(*ref.get_inputs())
    assert {package}.last_path(KERNEL) == "reference"
'''


def kernel_test(package: str, kernel: ExportedKernel) -> str:
    """Tests of an exported kernel against its reference on fresh random inputs of every verified shape."""
    env = f"{package.upper()}_FORCE_REFERENCE"
    return _test_preamble(package, kernel, "against its reference on fresh random inputs", "import secrets\n") + f'''SHAPES = list(dict.fromkeys(
    [tuple(s) if not isinstance(s, int) else (s,) for s in [*getattr(ref, "CHECK_SHAPES", []), *ref.SHAPES]]
))  # every checked and benchmarked shape, once


def draw(shape, dtype, device):
    generator = torch.Generator().manual_seed(secrets.randbits(62))
    return [t.to(device).contiguous() for t in ref.make_inputs(shape, getattr(torch, dtype), "cpu", generator)]


@pytest.mark.parametrize("device,dtype", VERIFIED)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_reference(device, dtype, shape, monkeypatch):
    if not available(device):
        pytest.skip(f"no {{device}} device here")
    monkeypatch.delenv("{env}", raising=False)
    inputs = draw(shape, dtype, device)
    assert {package}.implementation(KERNEL, device, dtype) == "optimized"
    got = outputs({package}.{kernel.name}(*inputs))
    assert {package}.last_path(KERNEL) == "optimized"
    with torch.no_grad():
        gold = outputs(ref.reference(*[t.double() if t.is_floating_point() else t for t in inputs]))
        base = outputs(ref.reference(*inputs))
    assert_matches(got, gold, base, *TOLERANCES[dtype])


def test_force_reference(monkeypatch):
    device, dtype = VERIFIED[0] if available(VERIFIED[0][0]) else ("cpu", VERIFIED[0][1])
    monkeypatch.setenv("{env}", "1")
    inputs = draw(SHAPES[0], dtype, device)
    assert {package}.implementation(KERNEL, device, dtype) == "reference"
    {package}.{kernel.name}(*inputs)
    assert {package}.last_path(KERNEL) == "reference"


def test_unverified_device_falls_back(monkeypatch):
    monkeypatch.delenv("{env}", raising=False)
    assert {package}.implementation(KERNEL, "not-a-device", VERIFIED[0][1]) == "reference"
'''


def _fmt(value: float | None, spec: str) -> str:
    return format(value, spec) if value is not None else ""


def bench_rows(kernels: list[ExportedKernel]) -> list[dict[str, str]]:
    return [{
        "kernel": k.name, "problem": k.problem, "run": str(k.run_id), "candidate": str(k.candidate_id), "status": k.status, "review": k.review,
        "device": k.device, "device_name": k.device_name, "torch": str(k.environment.get("torch") or ""), "triton": str(k.environment.get("triton") or ""),
        "cuda": str(k.environment.get("cuda") or ""), "isolation": k.isolation, "date": k.date, "speedup": _fmt(k.speedup, ".4f"),
        "ci_low": _fmt(k.ci[0], ".4f"), "ci_high": _fmt(k.ci[1], ".4f"), "baseline_ms": _fmt(k.baseline_ms, ".5f"), "candidate_ms": _fmt(k.candidate_ms, ".5f"),
        "reverified": k.reverified,
    } for k in kernels]


def benchmarks_csv(kernels: list[ExportedKernel]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(BENCH_COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(bench_rows(kernels))
    return buffer.getvalue()


def benchmarks_md(package: str, kernels: list[ExportedKernel], skipped: list[tuple[str, str]]) -> str:
    lines = [f"# {package}: measured speedups", "",
             "Speedups are the medians of A/B timing against each problem's baseline with a bootstrap 95% interval, "
             "measured by kernel-agent in its sandbox; every kernel was re-verified against its reference before export.", "",
             "| kernel | run | candidate | device | speedup | 95% interval | baseline ms | candidate ms | status | review | date |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in bench_rows(kernels):
        interval = f"[{row['ci_low']}, {row['ci_high']}]" if row["ci_low"] else "-"
        lines.append(f"| {row['kernel']} | {row['run']} | {row['candidate']} | {row['device']} ({row['device_name']}) | {row['speedup']}x | {interval} | "
                     f"{row['baseline_ms']} | {row['candidate_ms']} | {row['status']} | {row['review'] or '-'} | {row['date']} |")
    lines += ["", "## Provenance", ""]
    for k in kernels:
        env = k.environment
        lines.append(f"- **{k.name}** (problem `{k.problem}`, run {k.run_id}, candidate {k.candidate_id}): {k.device} {k.device_name}; "
                     f"torch {env.get('torch')}, triton {env.get('triton') or '-'}, cuda {env.get('cuda') or '-'}, python {env.get('python')}, "
                     f"kernel-agent {env.get('kernel_agent')}, threads {env.get('threads')}; isolation: {k.isolation}; "
                     f"verified dtypes on {k.device}: {', '.join(d for _, d in k.verified)}; re-verified at export: {k.reverified}")
    if skipped:
        lines += ["", "## Not exported", ""] + [f"- **{name}**: {reason}" for name, reason in skipped]
    return "\n".join(lines) + "\n"
