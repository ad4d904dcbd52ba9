"""The runtime's dispatch counters: every call counted on its path, a fallback under its reason, on a Registry
over real modules and on packages rendered from both export templates."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch

from kernel_agent.export.runtime.dispatch import Registry
from unit.export.test_hf_kernels import load_variant, project  # noqa: F401 (project is a fixture)
from unit.export.test_package_files import exported  # noqa: F401 (a fixture)
from unit.export.test_runtime import calls, package, table  # noqa: F401 (package is a fixture)


def test_optimized_and_unverified_calls_are_counted_with_the_reason(
    package: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry = Registry(package, table("add", "mlp"))
    monkeypatch.delenv(registry.force_env, raising=False)
    assert registry.dispatch_counts() == {
        "add": {"optimized": 0, "fallback": {}},
        "mlp": {"optimized": 0, "fallback": {}},
    }
    x = torch.ones(3)
    for _ in range(3):
        registry.call("add", (x,), {})
    registry.call("add", (x.double(),), {})
    registry.call("add", (), {"x": x.half()})  # a keyword tensor is what the call is keyed on
    counts = registry.dispatch_counts()
    assert counts["add"] == {
        "optimized": 3,
        "fallback": {"not verified on cpu/float64": 1, "not verified on cpu/float16": 1},
    }
    assert len(calls(package, "add", "optimized")) == 3 and len(calls(package, "add", "reference")) == 2
    assert registry.last_path("add") == "reference"  # last_path still reports the last call
    assert json.loads(json.dumps(counts)) == counts  # plain data
    counts["add"]["fallback"].clear()  # a snapshot, not the registry's own dicts
    assert registry.dispatch_counts()["add"]["optimized"] == 3 and registry.dispatch_counts()["add"]["fallback"]


def test_the_module_path_is_counted_too(package: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from kernel_agent.export.runtime.module import DispatchModule

    registry = Registry(package, table("mlp"))
    monkeypatch.delenv(registry.force_env, raising=False)
    layer = DispatchModule.create(registry, "mlp", ())
    with torch.no_grad():
        layer(torch.ones(2, 4))
        layer.double()(torch.ones(2, 4, dtype=torch.float64))
    assert registry.dispatch_counts()["mlp"] == {"optimized": 1, "fallback": {"not verified on cpu/float64": 1}}


def test_forced_reference_and_requires_env_name_their_variable(
    package: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernels = table("add")
    kernels["add"]["requires_env"] = {"TRITON_INTERPRET": "1"}
    registry = Registry(package, kernels)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv(registry.force_env, "1")
    x = torch.ones(3)
    registry.call("add", (x,), {})
    monkeypatch.delenv(registry.force_env)
    registry.call("add", (x,), {})
    registry.call("add", (x,), {})
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    registry.call("add", (x,), {})
    assert registry.dispatch_counts()["add"] == {
        "optimized": 1,
        "fallback": {f"forced by {registry.force_env}": 1, "requires TRITON_INTERPRET=1": 2},
    }
    assert registry.fallback_reason("add", "cpu", "float32") is None
    assert registry.implementation("add", "cpu", "float32") == "optimized"
    assert registry.dispatch_counts()["add"]["optimized"] == 1  # implementation() asks; it is not a call


def test_reset_starts_again_from_zero(package: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    registry = Registry(package, table("add"))
    monkeypatch.delenv(registry.force_env, raising=False)
    registry.call("add", (torch.ones(2),), {})
    registry.call("add", (torch.ones(2, dtype=torch.float64),), {})
    registry.reset_dispatch_counts()
    assert registry.dispatch_counts() == {"add": {"optimized": 0, "fallback": {}}}
    registry.call("add", (torch.ones(2),), {})
    assert registry.dispatch_counts() == {"add": {"optimized": 1, "fallback": {}}}


def test_calls_from_threads_are_all_counted(package: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    registry = Registry(package, table("add"))
    monkeypatch.delenv(registry.force_env, raising=False)
    x, y = torch.ones(2), torch.ones(2, dtype=torch.float64)

    def work() -> None:
        for i in range(200):
            registry.choose("add", (x if i % 2 else y,), {})

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert registry.dispatch_counts()["add"] == {"optimized": 800, "fallback": {"not verified on cpu/float64": 800}}


def test_a_rendered_pip_package_exports_the_counters(
    exported: tuple[Path, str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, name = exported
    module = __import__(name)
    assert {"dispatch_counts", "reset_dispatch_counts"} <= set(module.__all__)
    monkeypatch.delenv(module.FORCE_ENV, raising=False)
    x = torch.randn(4, 8)
    module.soft_max(x)
    module.soft_max(x.double())
    with torch.no_grad():
        module.kb_linear()(x)
    assert module.dispatch_counts() == {
        "soft_max": {"optimized": 1, "fallback": {"not verified on cpu/float64": 1}},
        "kb_linear": {"optimized": 1, "fallback": {}},
    }
    module.reset_dispatch_counts()
    assert module.dispatch_counts()["soft_max"] == {"optimized": 0, "fallback": {}}


def test_a_rendered_hf_variant_counts_its_ops(project: tuple[Path, str, list[str]]) -> None:  # noqa: F811
    out, _, _ = project
    module = load_variant(out / "build" / "torch-cpu")
    assert {"dispatch_counts", "reset_dispatch_counts"} <= set(module.__all__)
    x = torch.randn(4, 8)
    module.soft_max(x)
    module.gpu_only(x)  # verified on cuda only: the CPU variant runs the reference
    counts = module.dispatch_counts()
    assert counts["soft_max"] == {"optimized": 1, "fallback": {}}
    assert counts["gpu_only"] == {"optimized": 0, "fallback": {"not verified on cpu/float32": 1}}
    assert counts["mul_add"] == {"optimized": 0, "fallback": {}}
