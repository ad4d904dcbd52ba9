"""Choose, per call, between a kernel's optimized version and its reference.

The optimized version runs only on a (device, dtype) it was verified on: verification is the
only evidence it is right, so everywhere else (and whenever `<PACKAGE>_FORCE_REFERENCE` is set)
the call goes to the reference. The variable's name comes from the package's own name at
import, so this file ships unchanged into every package.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from .tuned import config_for, current_device_name

OPTIMIZED, REFERENCE = "optimized", "reference"
PICKS_KEPT = 4096  # per-shape config picks remembered per package, then forgotten all at once
_REGISTRIES: dict[str, Registry] = {}


def force_variable(package: str) -> str:
    """`mykernels` -> `MYKERNELS_FORCE_REFERENCE` (the last part of a dotted name, so a vendored
    copy keeps its name)."""
    return f"{package.rpartition('.')[2].upper()}_FORCE_REFERENCE"


def signature(inputs: Iterable[Any]) -> tuple[str, str]:
    """(device type, dtype name) of the first floating tensor input (else the first tensor): what
    verification keyed on."""
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
    chosen = next((t for t in tensors if t.is_floating_point()), tensors[0] if tensors else None)
    if chosen is None:
        return "cpu", ""
    return chosen.device.type, str(chosen.dtype).removeprefix("torch.")


def registry(package: str) -> Registry:
    """The registry of an (imported) package: how a pickled DispatchModule finds its package's again."""
    importlib.import_module(package)
    return _REGISTRIES[package]


class Registry:
    """The kernels of one package (`kernels`: name -> its table entry), the path each one's last call took,
    and how many calls took each path (a fallback to the reference counted under its reason).

    A table entry names the optimized module (`module`, defining `kernel` or `ModelNew`), the reference
    module (`reference`, defining `reference` or `Model`), both relative to `package`, and the
    [device, dtype] pairs it was `verified` on. Optional: `modules` (device -> the optimized module
    verified on that device, when devices have different winners) and `requires_env` (variables that
    must hold these values for the optimized path, as they did when it was verified: a Triton kernel
    verified under `TRITON_INTERPRET=1` runs on a CPU only under it).
    """

    def __init__(self, package: str, kernels: dict[str, dict[str, Any]], tuned: Path | None = None) -> None:
        self.package = package
        self.kernels = kernels
        self.tuned = tuned  # the folder of per-shape config tables (runtime/tuned.py), if the package has one
        self.force_env = force_variable(package)
        self._last: dict[str, str] = {}
        # Calls per kernel per outcome ("optimized" or a fallback's reason). The reasons are built once (the
        # unverified ones once per (device, dtype) seen), so a call costs a lookup and a locked increment.
        self._counts: dict[str, dict[str, int]] = {kernel: {} for kernel in kernels}
        self._counts_lock = threading.Lock()
        self._forced_reason = f"forced by {self.force_env}"
        self._env_reasons = {
            kernel: {name: f"requires {name}={value}" for name, value in spec.get("requires_env", {}).items()}
            for kernel, spec in kernels.items()
        }
        self._unverified_reasons: dict[tuple[str, str], str] = {}
        self._configs: dict[str, dict[str, Any] | None] = {}
        self._picked: dict[tuple[str, str, tuple[int, ...]], tuple[dict[str, Any] | None, ModuleType | None]] = {}
        _REGISTRIES[package] = self

    def forced_reference(self) -> bool:
        return os.environ.get(self.force_env, "").strip().lower() not in ("", "0", "false", "no")

    def implementation(self, kernel: str, device: str, dtype: str) -> str:
        """`optimized` when (device, dtype) was verified for this kernel and the reference is not
        forced, else `reference`."""
        return REFERENCE if self.fallback_reason(kernel, device, dtype) else OPTIMIZED

    def fallback_reason(self, kernel: str, device: str, dtype: str) -> str | None:
        """Why a call on (device, dtype) runs the reference (forced, a required variable, not verified
        there), or None when it runs the optimized version."""
        spec = self.kernels[kernel]
        if self.forced_reference():
            return self._forced_reason
        for name, value in spec.get("requires_env", {}).items():
            if os.environ.get(name) != value:
                return self._env_reasons[kernel][name]
        if [device, dtype] in [list(pair) for pair in spec["verified"]]:
            return None
        reason = self._unverified_reasons.get((device, dtype))
        if reason is None:
            reason = self._unverified_reasons.setdefault((device, dtype), f"not verified on {device}/{dtype}")
        return reason

    def last_path(self, kernel: str) -> str | None:
        """The path ("optimized" or "reference") the last call of `kernel` took, or None before any call."""
        return self._last.get(kernel)

    def dispatch_counts(self) -> dict[str, dict[str, Any]]:
        """Calls per kernel since import (or the last reset), as plain JSON-able data:
        `{kernel: {"optimized": n, "fallback": {reason: n}}}`, every kernel of the package listed."""
        with self._counts_lock:
            counts = {kernel: dict(outcomes) for kernel, outcomes in self._counts.items()}
        return {
            kernel: {
                "optimized": outcomes.pop(OPTIMIZED, 0),
                "fallback": outcomes,
            }
            for kernel, outcomes in counts.items()
        }

    def reset_dispatch_counts(self) -> None:
        """Start counting again from zero (e.g. after a warm-up, before the passes that count)."""
        with self._counts_lock:
            for outcomes in self._counts.values():
                outcomes.clear()

    def choose(self, kernel: str, args: tuple, kwargs: dict[str, Any]) -> str:
        """The path this call takes (keyword tensors count as inputs too), recorded for last_path() and
        counted for dispatch_counts()."""
        reason = self.fallback_reason(kernel, *signature([*args, *kwargs.values()]))
        path = REFERENCE if reason else OPTIMIZED
        outcomes = self._counts[kernel]
        with self._counts_lock:
            outcomes[reason or OPTIMIZED] = outcomes.get(reason or OPTIMIZED, 0) + 1
        self._last[kernel] = path
        return path

    def load(self, kernel: str, path: str, device: str | None = None) -> ModuleType:
        """The kernel's optimized module (the one verified on `device`, when devices differ) or its
        reference, imported on first use (a Triton kernel compiles only when chosen)."""
        spec = self.kernels[kernel]
        if path != OPTIMIZED:
            return importlib.import_module(f"{self.package}.{spec['reference']}")
        module = spec.get("modules", {}).get(device, spec["module"])
        return importlib.import_module(f"{self.package}.{module}")

    def last_config(self, kernel: str) -> dict[str, Any] | None:
        """The tuned config the last optimized call of `kernel` ran with; None when it ran the winner as exported."""
        return self._configs.get(kernel)

    def configured(self, kernel: str, device: str, args: tuple, kwargs: dict[str, Any]) -> ModuleType | None:
        """The winner compiled with the config tuned for this call's shape (the nearest tuned one), when the
        package ships one for `device` and the problem says how to read a shape from its inputs (`shape_of`).
        Picks are remembered per shape: a lookup costs a call to shape_of and a dict hit."""
        spec = self.kernels[kernel]
        variants = spec.get("configured", {}).get(device)
        shape_of = getattr(self.load(kernel, REFERENCE), "shape_of", None) if variants and self.tuned else None
        if shape_of is None:
            return None
        sizes = tuple(int(v) for v in shape_of(*args, **kwargs))
        picked = self._picked.get((kernel, device, sizes))
        if picked is None:
            shape = dict(zip(spec["shape_names"], sizes))
            config = config_for(self.tuned, kernel, current_device_name(device), shape, spec["default_config"])
            name = next((name for wanted, name in variants if wanted == config), None)
            module = importlib.import_module(f"{self.package}.{name}") if name else None
            if len(self._picked) >= PICKS_KEPT:
                self._picked.clear()
            picked = self._picked[(kernel, device, sizes)] = (config if module else None, module)
        self._configs[kernel] = picked[0]
        return picked[1]

    def call(self, kernel: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        """Run the chosen implementation with the caller's arguments; its result (a tensor, a tuple)
        is returned as it is. An optimized call runs the variant tuned for its shape when there is one."""
        path = self.choose(kernel, args, kwargs)
        device = signature([*args, *kwargs.values()])[0]
        self._configs[kernel] = None
        if path == OPTIMIZED:
            module = self.configured(kernel, device, args, kwargs) or self.load(kernel, path, device)
            return module.kernel(*args, **kwargs)
        return self.load(kernel, path, device).reference(*args, **kwargs)

    # One registry per package: a copied, deep-copied or unpickled DispatchModule reports to the same last_path().
    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return registry, (self.package,)
