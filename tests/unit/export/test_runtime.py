"""The exported package's runtime, tested where it lives: the same files ship byte for byte into every export."""

from __future__ import annotations

import copy
import itertools
import pickle
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from kernel_agent.export.runtime.dispatch import Registry, force_variable, signature
from kernel_agent.export.runtime.module import DispatchModule

_names = itertools.count()

# Each module records its calls, so a test sees which implementation ran, not only what last_path() claims.
KERNEL = """
CALLS = []

def kernel(x, scale=1.0):
    CALLS.append(x.dtype)
    return x * scale, x.sum()
"""
REFERENCE = KERNEL.replace("def kernel", "def reference")
# ModelNew starts from other weights than Model: only the weight sync makes the two agree.
MODEL = """
import torch

CALLS = []

def get_init_inputs():
    return [4]

class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = torch.nn.Linear(n, n)

    def forward(self, x, shift=0.0):
        CALLS.append(x.dtype)
        return self.linear(x) + shift
"""
MODEL_NEW = MODEL.replace("class Model(", "class ModelNew(").replace(
    "self.linear = torch.nn.Linear(n, n)",
    "self.linear = torch.nn.Linear(n, n)\n        torch.nn.init.zeros_(self.linear.weight)",
)


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh importable package holding one native kernel (`add`) and one KernelBench module
    (`mlp`), verified on (cpu, float32)."""
    name = f"fake_export_{next(_names)}"
    folder = tmp_path / name
    folder.mkdir()
    sources = {
        "__init__.py": "",
        "_kernel_add.py": KERNEL,
        "_reference_add.py": REFERENCE,
        "_kernel_mlp.py": MODEL_NEW,
        "_reference_mlp.py": MODEL,
        "_kernel_broken.py": "raise ImportError('must not be imported unless chosen')\n",
        "_reference_broken.py": REFERENCE,
    }
    for file, source in sources.items():
        (folder / file).write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


def table(*kernels: str) -> dict[str, dict]:
    return {
        k: {"module": f"_kernel_{k}", "reference": f"_reference_{k}", "verified": [["cpu", "float32"]]} for k in kernels
    }


def calls(package: str, kernel: str, path: str) -> list[torch.dtype]:
    """The dtypes the optimized or reference module has been called with ([] when it was never imported)."""
    module = sys.modules.get(f"{package}._{'kernel' if path == 'optimized' else 'reference'}_{kernel}")
    return module.CALLS if module else []


def test_force_variable_comes_from_the_package_name() -> None:
    assert force_variable("mykernels") == "MYKERNELS_FORCE_REFERENCE"
    assert force_variable("vendor.my_kernels") == "MY_KERNELS_FORCE_REFERENCE"  # a vendored copy keeps its own switch
    assert Registry("some_pkg", {}).force_env == "SOME_PKG_FORCE_REFERENCE"


def test_signature_is_the_first_floating_tensor() -> None:
    ints, halves = torch.arange(3), torch.zeros(2, dtype=torch.float16)
    assert signature([ints, 3, halves]) == ("cpu", "float16")
    assert signature([ints]) == ("cpu", "int64")
    assert signature([1, "x"]) == ("cpu", "")


def test_optimized_only_on_the_verified_device_and_dtype(package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = Registry(package, table("add"))
    monkeypatch.delenv(registry.force_env, raising=False)
    assert registry.implementation("add", "cpu", "float32") == "optimized"
    assert [
        registry.implementation("add", *other)
        for other in [("cpu", "float64"), ("cuda", "float32"), ("not-a-device", "float32")]
    ] == ["reference"] * 3
    assert registry.last_path("add") is None
    x = torch.ones(3)
    registry.call("add", (x,), {})
    assert registry.last_path("add") == "optimized" and calls(package, "add", "optimized") == [torch.float32]
    registry.call("add", (x.double(),), {})
    assert registry.last_path("add") == "reference" and calls(package, "add", "reference") == [torch.float64]
    assert calls(package, "add", "optimized") == [torch.float32]  # the unverified call did not reach the kernel


@pytest.mark.parametrize(
    "value,forced",
    [("1", True), ("true", True), (" YES ", True), ("", False), ("0", False), ("false", False), ("no", False)],
)
def test_force_reference_switch(package: str, monkeypatch: pytest.MonkeyPatch, value: str, forced: bool) -> None:
    registry = Registry(package, table("add"))
    monkeypatch.setenv(registry.force_env, value)
    assert registry.forced_reference() is forced
    registry.call("add", (torch.ones(2),), {})
    assert registry.last_path("add") == ("reference" if forced else "optimized")
    assert len(calls(package, "add", "reference")) == int(forced)


def test_tuple_outputs_and_keyword_arguments_pass_through(package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = Registry(package, table("add"))
    monkeypatch.delenv(registry.force_env, raising=False)
    x = torch.arange(4, dtype=torch.float32)
    for inputs in [x, x.double()]:
        scaled, total = registry.call("add", (inputs,), {"scale": 3.0})
        assert torch.allclose(scaled, inputs * 3)
        assert torch.allclose(total, inputs.sum())
    # A tensor passed by keyword decides the path like a positional one.
    registry.call("add", (), {"x": x.double()})
    assert registry.last_path("add") == "reference"
    registry.call("add", (), {"x": x})
    assert registry.last_path("add") == "optimized"


def test_the_optimized_module_is_imported_only_when_chosen(package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = Registry(package, table("broken"))
    monkeypatch.delenv(registry.force_env, raising=False)
    registry.call("broken", (torch.ones(2, dtype=torch.float64),), {})
    assert registry.last_path("broken") == "reference"
    with pytest.raises(ImportError, match="unless chosen"):
        registry.call("broken", (torch.ones(2),), {})


def test_module_shares_the_reference_weights(package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = Registry(package, table("mlp"))
    monkeypatch.delenv(registry.force_env, raising=False)
    torch.manual_seed(0)
    module = DispatchModule.create(registry, "mlp", ())  # default init inputs: get_init_inputs() -> [4]
    assert not module.optimized.training and not module.reference.training
    x = torch.randn(2, 4)
    with torch.no_grad():
        assert torch.allclose(module(x, shift=1.0), module.reference(x) + 1.0)  # ModelNew started from zero weights
    assert registry.last_path("mlp") == "optimized" and len(calls(package, "mlp", "optimized")) == 1
    assert set(module.state_dict()) == {
        "linear.weight",
        "linear.bias",
    }  # the reference's own keys, as a user's Model has

    other = sys.modules[f"{package}._reference_mlp"].Model(4)
    module.load_state_dict(other.state_dict())
    with torch.no_grad():
        assert torch.allclose(module(x), other(x))
        assert registry.last_path("mlp") == "optimized"
        module.double()(x.double())
    assert registry.last_path("mlp") == "reference"

    monkeypatch.setenv(registry.force_env, "1")
    with torch.no_grad():
        module.float()(x)
    assert registry.last_path("mlp") == "reference"


def test_module_init_inputs_are_passed_to_both_models(package: str) -> None:
    module = DispatchModule.create(Registry(package, table("mlp")), "mlp", (3,))
    assert module.reference.linear.in_features == module.optimized.linear.in_features == 3
    with pytest.raises(RuntimeError):
        module.load_state_dict(
            sys.modules[f"{package}._reference_mlp"].Model(4).state_dict()
        )  # shapes must match, as for Model


def test_copies_report_to_the_same_registry(package: str, monkeypatch: pytest.MonkeyPatch) -> None:
    registry = Registry(package, table("mlp"))
    monkeypatch.delenv(registry.force_env, raising=False)
    module = DispatchModule.create(registry, "mlp", ())
    for other in [copy.deepcopy(module), pickle.loads(pickle.dumps(module))]:
        assert other.registry is registry and other.reference is not module.reference
        with torch.no_grad():
            other(torch.randn(1, 4))
            assert registry.last_path("mlp") == "optimized"
            monkeypatch.setenv(registry.force_env, "1")
            other(torch.randn(1, 4))
            assert registry.last_path("mlp") == "reference"
            monkeypatch.delenv(registry.force_env)


def test_a_call_runs_the_variant_tuned_for_its_shape(package: str, tmp_path: Path) -> None:
    """The nearest tuned shape's config picks the module compiled with it; the winner's own config (the default)
    and a reference without `shape_of` run the winner as exported."""
    import json

    from kernel_agent.export.runtime.tuned import cpu_name, table_file

    folder = tmp_path / package
    (folder / "_kernel_add_config0.py").write_text(KERNEL)
    (folder / "_reference_add.py").write_text(REFERENCE + "\ndef shape_of(x, scale=1.0):\n    return tuple(x.shape)\n")
    entries = [{"shape": {"n": 4}, "config": {"S": 2}}, {"shape": {"n": 1000}, "config": {"S": 1}}]
    tuned = folder / "tuned"
    tuned.mkdir()
    table_file(tuned, "add", cpu_name()).write_text(json.dumps({"default": {"S": 1}, "configs": entries}))
    spec = table("add")
    spec["add"] |= {
        "default_config": {"S": 1},
        "shape_names": ["n"],
        "configured": {"cpu": [[{"S": 2}, "_kernel_add_config0"]]},
    }
    registry = Registry(package, spec, tuned)
    registry.call("add", (torch.ones(5),), {})
    assert registry.last_config("add") == {"S": 2}
    assert len(sys.modules[f"{package}._kernel_add_config0"].CALLS) == 1 and calls(package, "add", "optimized") == []
    registry.call("add", (torch.ones(800),), {})
    assert registry.last_config("add") is None and len(calls(package, "add", "optimized")) == 1
    assert Registry(package, spec).configured("add", "cpu", (torch.ones(5),), {}) is None  # no tables: no variants
