"""The work one call does at one shape: FLOPs (declared by the problem, else counted by torch's
FlopCounterMode over the reference) and the minimum bytes a kernel must move (its inputs once plus its
outputs once, or the problem's declared `bytes_moved`).

Only torch is needed here (no database, no LLM client).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch

from kernel_agent.measure.error import ProfileError
from kernel_agent.problem.load import Problem, Shape, as_outputs, seeded_generator, torch_dtype

FlopsSource = Literal["declared", "flop_counter", "none"]  # "none": neither declared nor countable
BytesSource = Literal["declared", "io"]  # "io": inputs + outputs, each once


@dataclass
class WorkCounts:
    """The work one call does at one shape: FLOPs, minimum bytes moved, and their ratio."""

    flops: int | None  # None when neither declared nor countable (e.g. elementwise ops FlopCounterMode ignores)
    bytes: int
    arithmetic_intensity: float | None  # FLOP per byte
    flops_source: FlopsSource
    bytes_source: BytesSource = "io"


def _nbytes(tensor: torch.Tensor, itemsize: int | None = None) -> int:
    """Bytes of a tensor; floating tensors counted at `itemsize` when the run used a stand-in dtype."""
    size = itemsize if itemsize is not None and tensor.is_floating_point() else tensor.element_size()
    return tensor.numel() * size


def _run_reference(
    problem: Problem, shape: Shape, dtype: str
) -> tuple[list[torch.Tensor], tuple[torch.Tensor, ...], int, list[torch.Tensor]]:
    """Run the reference once on CPU under FlopCounterMode: (inputs, outputs, flops, parameters)."""
    from torch.utils.flop_counter import FlopCounterMode

    module = problem.module
    if module is None:
        raise ProfileError(f"{problem.name}: the problem module is not loaded")
    params: list[torch.Tensor] = []
    with torch.no_grad():
        if problem.kind == "kernelbench":
            torch.manual_seed(0)
            inputs = [t.contiguous() if isinstance(t, torch.Tensor) else t for t in module.get_inputs()]
            model = module.Model(*module.get_init_inputs()).eval()
            params = [*model.parameters(), *model.buffers()]
            fn: Callable[..., Any] = model
        else:
            inputs = [t.contiguous() for t in module.make_inputs(shape, torch_dtype(dtype), "cpu", seeded_generator(0))]
            fn = module.reference
        with FlopCounterMode(display=False) as counter:
            outputs = as_outputs(fn(*inputs))
    return [t for t in inputs if isinstance(t, torch.Tensor)], outputs, int(counter.get_total_flops()), params


def _reference_run(
    problem: Problem, shape: Shape, dtype: str
) -> tuple[list[torch.Tensor], tuple[torch.Tensor, ...], int, list[torch.Tensor]]:
    """The reference in `dtype`; float32 as a stand-in when CPU lacks a kernel for it (bytes are
    rescaled by the caller)."""
    try:
        if dtype == "float16":  # CPU float16 matmuls are emulated and very slow: float32 counts the same work
            return _run_reference(problem, shape, "float32")
        return _run_reference(problem, shape, dtype)
    except ProfileError:
        raise
    except Exception as first:
        if dtype == "float32":
            raise ProfileError(
                f"{problem.name}: the reference failed at shape {list(shape)}: {type(first).__name__}: {first}"
            ) from None
        try:
            return _run_reference(problem, shape, "float32")
        except Exception as exc:
            raise ProfileError(
                f"{problem.name}: the reference failed at shape {list(shape)}: {type(exc).__name__}: {exc}"
            ) from None


def work_counts(problem: Problem, shape: Shape, dtype: str) -> WorkCounts:
    """FLOPs and minimum bytes of one call at `shape`/`dtype`.

    FLOPs: the problem's `flops(shape)` when declared, else FlopCounterMode over the
    reference run on real CPU inputs of that shape (KernelBench: `Model` on
    `get_inputs()`); the counter sees matmuls, convolutions and attention only, so a
    count of zero is reported as unknown (`flops=None`, source "none").
    Bytes: the declared `bytes_moved(shape, dtype)`, else every input read once plus
    every output written once (KernelBench adds the weights, which must be read too).
    """
    module = problem.module
    declared_flops = getattr(module, "flops", None)
    declared_bytes = getattr(module, "bytes_moved", None)
    flops: int | None = None
    source: FlopsSource = "none"
    if callable(declared_flops):
        try:
            flops, source = int(declared_flops(shape)), "declared"
        except Exception as exc:
            raise ProfileError(f"{problem.name}: flops({shape}) failed: {type(exc).__name__}: {exc}") from None
    nbytes: int | None = None
    bytes_source: BytesSource = "io"
    if callable(declared_bytes):
        try:
            nbytes, bytes_source = int(declared_bytes(shape, torch_dtype(dtype))), "declared"
        except Exception as exc:
            raise ProfileError(
                f"{problem.name}: bytes_moved({shape}, {dtype}) failed: {type(exc).__name__}: {exc}"
            ) from None
    if source == "none" or nbytes is None:
        inputs, outputs, counted, params = _reference_run(problem, shape, dtype)
        if source == "none" and counted > 0:
            flops, source = counted, "flop_counter"
        if nbytes is None:
            itemsize = torch.empty((), dtype=torch_dtype(dtype)).element_size()
            nbytes = sum(_nbytes(t, itemsize) for t in [*inputs, *outputs, *params])
    intensity = flops / nbytes if flops is not None and nbytes > 0 else None
    return WorkCounts(flops, nbytes, intensity, source, bytes_source)
