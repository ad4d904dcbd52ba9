"""A package's kernels swapped into a copy of a model, the way each format is meant to be used.

hf-kernels: through `kernels.kernelize` with a mapping from each layer class (made extensible with
`kernels.replace_kernel_forward_from_hub`) to the package's layer (`LocalLayerRepository`), so the model runs the
package's torch.library ops exactly as a `kernels` user's model would. pip: each layer instance's forward becomes
the package's function of the same kernel. Either way the unswapped model is left as it was.
"""

from __future__ import annotations

import copy
import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import torch

from kernel_agent.prove.binding import Bound, bind
from kernel_agent.prove.recipe import ModelCase


@dataclass(frozen=True)
class Swapped:
    """The swapped copy, how many layer instances of each kernel it runs from the package, and how; `package` is
    the imported package module whose runtime counts each call's path (None where none was found)."""

    model: torch.nn.Module
    counts: dict[str, int]
    how: str
    package: ModuleType | None = None
    bound: dict[str, Bound] = field(default_factory=dict)  # kernel -> what its module binding did

    def paths(self, kernel: str, case: ModelCase) -> list[str]:
        """The module paths running the kernel: its bound instances, or every instance of its layer class."""
        if kernel in self.bound:
            return list(self.bound[kernel].swapped)
        cls = case.layers.get(kernel)
        return [path for path, m in case.model.named_modules() if cls is not None and type(m) is cls]

    def reset_counts(self) -> None:
        for b in self.bound.values():
            b.reset()
        reset = getattr(self.package, "reset_dispatch_counts", None)
        if callable(reset):
            reset()

    def dispatch_counts(self) -> object:
        """The package's own snapshot of each call's path (hostile data: `prove/dispatch.py` reads it), or None
        for a package exported before it counted."""
        counts = getattr(self.package, "dispatch_counts", None)
        return counts() if callable(counts) else None


def camel(name: str) -> str:
    """A kernel's layer name in an hf-kernels package (export/hf_kernels.py camel)."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) or "Kernel"


def instances(model: torch.nn.Module, cls: type[torch.nn.Module]) -> list[torch.nn.Module]:
    return [m for m in model.modules() if type(m) is cls]


def swap(case: ModelCase, root: Path, fmt: str, package: str, kernels: list[str], device: str) -> Swapped:
    """A deep copy of the recipe's model with every layer of the given kernels running the package's version."""
    model = copy.deepcopy(case.model)
    wanted = {k: case.layers[k] for k in kernels if k in case.layers}
    counts = {k: len(instances(model, cls)) for k, cls in wanted.items()}
    if fmt == "hf-kernels":
        swapped = _kernelize(model, root / "build", wanted, device)
        return Swapped(swapped, counts, _kernels_version(), _loaded_from(root / "build"))
    sys.path.insert(0, str(root.resolve()))
    try:
        module = importlib.import_module(package)
    finally:
        sys.path.remove(str(root.resolve()))
    for kernel, cls in wanted.items():
        for layer in instances(model, cls):
            layer.forward = getattr(module, kernel)  # an instance attribute: the class and model A are untouched
    bound = {k: bind(model, case.bindings[k], getattr(module, k)) for k in kernels if k in case.bindings}
    counts |= {k: len(b.swapped) for k, b in bound.items()}
    return Swapped(model, counts, f"import {package}", module, bound)


def _loaded_from(build: Path) -> ModuleType | None:
    """The package module `kernels` imported from `build` (under a name of its own choosing)."""
    folder = str(build.resolve())
    for module in list(sys.modules.values()):
        where = getattr(module, "__file__", None) or ""
        if where.startswith(folder) and callable(getattr(module, "dispatch_counts", None)):
            return module
    return None


def _kernelize(
    model: torch.nn.Module, build: Path, wanted: dict[str, type[torch.nn.Module]], device: str
) -> torch.nn.Module:
    from kernels import LocalLayerRepository, Mode, kernelize, replace_kernel_forward_from_hub, use_kernel_mapping

    mapping = {}
    for kernel, cls in wanted.items():
        replace_kernel_forward_from_hub(cls, camel(kernel))
        mapping[camel(kernel)] = {device: LocalLayerRepository(repo_path=build, layer_name=camel(kernel))}
    with use_kernel_mapping(mapping):
        return kernelize(model, mode=Mode.INFERENCE, device=device, use_fallback=False)


def _kernels_version() -> str:
    import kernels

    return f"kernels {kernels.__version__} kernelize"
