"""A model to swap a package's kernels into: `path/to/file.py:factory` or `module:factory`, called with a size.

Why a factory the user names: the model is theirs (a `transformers` decoder built from a config, or their own
nn.Module); kernel-agent only needs the model, the inputs of each forward shape to time, which layer class each
kernel replaces, and the tolerance its outputs must hold to (`ModelCase`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


class RecipeError(ValueError):
    """A recipe that cannot be loaded or built: one line."""


@dataclass(frozen=True)
class Binding:
    """A module region's binding: the problem folder it was emitted as, the kernel's arguments (`arg:K`,
    `param:NAME`), the dtype of each, how the module returns its outputs, and the instances with their guards."""

    problem: str  # the folder name under problems/ (the manifest's kernel name)
    region: str
    args: tuple[str, ...]
    dtypes: tuple[str, ...]
    outputs: int
    output_kind: str
    instances: tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]  # (module path, class, guards)


@dataclass
class ModelCase:
    """What a recipe gives: the model (unswapped), the inputs of each forward shape (label -> positional inputs),
    the layer class each kernel replaces (kernel name -> a stateless nn.Module whose forward has the kernel's
    signature), and the tolerance (rtol, atol) on every output of the swapped model against the unswapped one."""

    model: torch.nn.Module
    inputs: dict[str, tuple[Any, ...]]
    layers: dict[str, type[torch.nn.Module]]
    tolerance: tuple[float, float] = (1e-4, 1e-5)
    note: str = ""  # what the recipe leaves out and why (said with the result)
    unused: dict[str, str] = field(default_factory=dict)  # kernel -> why the model has no layer for it
    bindings: dict[str, Binding] = field(default_factory=dict)  # problem folder -> module binding (prove/binding.py)
    unbound: dict[str, str] = field(default_factory=dict)  # problem folder -> why its region has no binding
    region_shares: dict[str, dict[str, Any]] = field(default_factory=dict)  # problem folder -> regions' hook shares


def load_recipe(spec: str, size: str) -> ModelCase:
    """Import `spec`'s factory and call it with `size`; any failure is a RecipeError with one line."""
    target, _, name = spec.rpartition(":")
    if not target or not name.isidentifier():
        raise RecipeError(f"--model {spec!r}: give FILE.py:FACTORY or MODULE:FACTORY")
    factory = getattr(_module(target), name, None)
    if not callable(factory):
        raise RecipeError(f"--model {spec!r}: {target} has no callable {name}")
    case = _build(factory, size, spec)
    if not isinstance(case, ModelCase):
        raise RecipeError(f"--model {spec!r}: {name}() returned {type(case).__name__}, not a ModelCase")
    if not case.inputs:
        raise RecipeError(f"--model {spec!r}: the recipe names no inputs to time")
    return case


def _build(factory: Callable[..., Any], size: str, spec: str) -> Any:
    try:
        return factory(size)
    except Exception as exc:  # noqa: BLE001 - the recipe is the user's code: its failure is reported in one line
        raise RecipeError(f"--model {spec!r} (size {size!r}): {type(exc).__name__}: {str(exc)[:200]}") from None


def _module(target: str) -> Any:
    try:
        if target.endswith(".py"):
            path = Path(target).resolve()
            if not path.is_file():
                raise RecipeError(f"--model: {target} is not a file")
            name = f"_kernel_agent_recipe_{path.stem}"
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # dataclasses and pickling look the module up by name
            spec.loader.exec_module(module)
            return module
        return importlib.import_module(target)
    except RecipeError:
        raise
    except Exception as exc:  # noqa: BLE001 - an import error of the user's recipe, in one line
        raise RecipeError(f"--model: cannot import {target}: {type(exc).__name__}: {str(exc)[:200]}") from None
