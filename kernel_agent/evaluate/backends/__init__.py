"""Kernel backends: detect a candidate's kind, check it statically, prepare it to run.

Each backend is one file declaring itself (a `Backend` subclass), registered in order in registry.py:
`triton` (interpreted on CPU, compiled on a GPU), `cuda` (torch load_inline),
`cpp` (a plain shared library built by the trusted side, cpp_build.py) and `torch`, the fallback.
"""

from __future__ import annotations

from kernel_agent.evaluate.backends.base import Backend, Prepared
from kernel_agent.evaluate.backends.lint import StaticFinding
from kernel_agent.evaluate.backends.registry import BACKENDS, detect_backend, get_backend, names

__all__ = ["BACKENDS", "Backend", "Prepared", "StaticFinding", "detect_backend", "get_backend", "names"]
