"""The backends, in the order detection tries them, and how a candidate's backend is found.

A backend is one file (a `Backend` subclass: its name, label, prompt rules, package requirements, devices and
source detection) plus its registration here, or, from another package, under the `kernel_agent.backends`
entry-point group (the mechanism third-party providers use too)."""

from __future__ import annotations

from importlib.metadata import entry_points

from kernel_agent.evaluate.backends.base import Backend
from kernel_agent.evaluate.backends.cpp_backend import CppBackend
from kernel_agent.evaluate.backends.cuda_backend import CudaBackend
from kernel_agent.evaluate.backends.torch_backend import TorchBackend
from kernel_agent.evaluate.backends.triton_backend import TritonBackend

ENTRY_POINT_GROUP = "kernel_agent.backends"
FALLBACK = TorchBackend()  # any source no other backend claims: plain PyTorch


def _registered() -> dict[str, Backend]:
    """Another package's backends first (their detection is the narrower one: a HIP source also calls
    load_inline), then the built-ins, the fallback last. A built-in's name cannot be taken."""
    builtin: list[Backend] = [TritonBackend(), CudaBackend(), CppBackend()]
    known = {b.name for b in builtin} | {FALLBACK.name}
    plugins = [e.load()() for e in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)]
    return {b.name: b for b in (*[p for p in plugins if p.name not in known], *builtin, FALLBACK)}


BACKENDS: dict[str, Backend] = _registered()


def names() -> tuple[str, ...]:
    return tuple(BACKENDS)


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise KeyError(f"unknown backend {name!r}; use one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


def detect_backend(source: str) -> str:
    """The first backend, in registration order, whose construct the source shows; PyTorch when none does."""
    return next(b.name for b in BACKENDS.values() if b.detects(source))
