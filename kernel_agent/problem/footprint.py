"""How much memory a problem needs, known before anything runs, and whether it fits here.

A KernelBench file sized for a GPU can want tens of GB for one call. Every input,
output and parameter is first built on PyTorch's `meta` device (shapes and dtypes,
no storage), so the trusted side can refuse a problem that cannot fit with the
numbers and the flag to change, in seconds, instead of being killed by the kernel's
OOM killer with no verdict.

The peak estimate follows what an evaluation holds (measured by
benchmarks/kernelbench_scale.py as the host's memory in use): the orchestrator keeps one
check case streaming (inputs, their float64 copies, gold in float64, the same-dtype
reference, the outputs read back) and the reference model in two precisions; the sealed
segment holds a call's inputs, or a timing round's input sets up to POOL_BYTES; each of
the two workers keeps its heap at its peak (the kernel's outputs and temporaries, the
allocator poison, a private copy of the inputs during checks) and its own model.
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from kernel_agent.core.verdict import Refusal, RefusalKind, Status, StatusError
from kernel_agent.problem.load import Problem, as_outputs, seeded_generator, torch_dtype

GB = 1 << 30
# What one evaluation needs of the host, fitted as an upper envelope of the host's used memory
# (MemTotal - MemAvailable) at its peak above idle, sampled every 0.2 s by benchmarks/kernelbench_scale.py
# over 14 KernelBench problems (benchmarks/results/2026-12-03-kernelbench-scale-cpu.md), with one call's
# inputs + outputs (W) and its traced temporaries (T) as separate terms. The tightest rows: 67_Conv2d_GELU
# (W 0.25 GB, T 3.94 GB, no gold) peaked at 15.3 GB against 16.6 estimated; 88_MinGPTNewGelu (W 0.5 GB,
# T 0.5 GB, gold) at 10.75 against 11.5; 82_conv_depthwise (W 1.99 GB, no gold) at 13.4-17.1 against 20.4.
BASE_BYTES = GB // 2  # per process, three processes: interpreter, torch, page tables
POOL_BYTES = GB  # a timing round's input sets are kept in the sealed segment for both sides up to this
SEGMENT_FACTOR = 1.0  # the sealed input segment (one memfd mapped by all three processes: counted once)
ORCHESTRATOR_FACTOR = 3.0  # a check case's inputs, the outputs read back (twice for the first case), the reference
WORKER_FACTOR = 2.5  # per worker, its heap kept at its peak (pinned malloc thresholds): outputs, poison, check copies
TEMPORARY_FACTOR = 3.0  # x the traced temporaries: the reference's and both kernels' (conv workspaces are not traced)
GOLD_FACTOR = 3.0  # on top, for the float64 gold: the inputs' float64 copies and the gold's outputs...
GOLD_TEMPORARY_FACTOR = 3.0  # ...and its temporaries, float64 beside the reference's
PARAMETER_FACTOR = 6.0  # x parameters in all: model + float64 gold model + sealed state segment + two workers' models


@dataclass(frozen=True)
class Footprint:
    """One call's working set for one (shape, dtype), and what an evaluation of it needs."""

    inputs: int
    outputs: int
    parameters: int
    temporaries: int = 0  # what the reference holds beyond its outputs at its peak (traced, see LiveBytes)
    gold_workspace: int = 0  # the float64 gold's largest convolution workspace, which no trace sees (conv_workspace)

    @property
    def working_set(self) -> int:
        return self.inputs + self.outputs + self.parameters

    @property
    def needed(self) -> int:
        """Host memory for an evaluation whose check cases are compared with a float64 gold."""
        return (
            self.needed_without_gold
            + int(GOLD_FACTOR * (self.inputs + self.outputs))
            + int(GOLD_TEMPORARY_FACTOR * self.temporaries)
            + self.gold_workspace
        )

    @property
    def needed_without_gold(self) -> int:
        """Host memory when the largest cases are compared with the same-dtype reference only."""
        per_call = self.inputs + self.outputs
        return int(
            (SEGMENT_FACTOR + ORCHESTRATOR_FACTOR + 2 * WORKER_FACTOR) * per_call
            + PARAMETER_FACTOR * self.parameters
            + TEMPORARY_FACTOR * self.temporaries  # a level 2 model's activations can be 80x its inputs and outputs
            + 3 * BASE_BYTES
            + POOL_BYTES
        )

    def describe(self) -> str:
        held = f", and {_gb(self.temporaries)} of temporaries at its peak" if self.temporaries else ""
        return (
            f"one call's working set {_gb(self.working_set)} (inputs {_gb(self.inputs)}, "
            f"outputs {_gb(self.outputs)}, parameters {_gb(self.parameters)}){held}"
        )


def _gb(n: int) -> str:
    return f"{n / GB:.2f} GB" if n >= GB // 100 else f"{n / (1 << 20):.1f} MB"


def _nbytes(tensors: object) -> int:
    if isinstance(tensors, torch.Tensor):
        return tensors.numel() * tensors.element_size()
    if isinstance(tensors, (list, tuple)):
        return sum(_nbytes(t) for t in tensors)
    return 0


class LiveBytes(TorchDispatchMode):
    """The most bytes of tensors the traced ops held alive at once: each op's outputs counted by storage
    (views share one) until the last tensor on it is collected. It sees what a forward keeps between
    ops, not an op's own workspace inside its kernel."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No torch.compile ever runs under this mode, so its dispatch needs no dynamo guard: torch's default wraps
        it in one whose first call imports torch._dynamo (1.4 s of every fresh `eval`, here)."""
        return False

    def __init__(self, existing: list[torch.Tensor]) -> None:
        super().__init__()
        self.existing = {t.untyped_storage()._cdata for t in existing}  # inputs and weights: not temporaries
        self.holders: dict[int, int] = {}
        self.live = 0
        self.peak = 0
        self.gold_workspace = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.convolution.default and len(args) == 9:
            self.gold_workspace = max(self.gold_workspace, conv_workspace(*args[:2], out, args[6], args[8]))
        for leaf in pytree.tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self._hold(leaf)
        return out

    def _hold(self, tensor: torch.Tensor) -> None:
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):  # sparse or storage-less: not counted
            return
        key, size = storage._cdata, storage.nbytes()
        if key in self.existing:  # a view of an input or a weight (the transposed weight of a linear)
            return
        if key not in self.holders:
            self.holders[key] = 0
            self.live += size
            self.peak = max(self.peak, self.live)
        self.holders[key] += 1
        weakref.finalize(tensor, self._release, key, size)

    def _release(self, key: int, size: int) -> None:
        self.holders[key] -= 1
        if not self.holders[key]:
            del self.holders[key]
            self.live -= size


def conv_workspace(inputs: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, transposed: bool, groups: int) -> int:
    """Bytes of the column buffer a float64 convolution allocates inside its kernel on a CPU: oneDNN has no
    float64, so ATen's slow path unfolds the input (im2col, vol2col) for the whole batch. Measured on torch
    2.13 (peak resident set of one call, 1 thread): a 5x7 conv2d over 8x64x512x256, KernelBench level1/56,
    needs 18.2 GB beside 0.25 GB of inputs, which an optimize batch met as an OOM kill. An upper bound:
    depthwise convolutions take no such buffer, and transposed 3-d ones unfold one sample at a time."""
    batch, kernel = inputs.shape[0], math.prod(weight.shape[2:])
    if transposed:  # columns: output channels x kernel x input positions
        return 8 * batch * weight.shape[1] * groups * kernel * math.prod(inputs.shape[2:])
    if groups > 1 and weight.shape[1] == 1:  # depthwise: a direct loop, no columns
        return 0
    return 8 * batch * inputs.shape[1] * kernel * math.prod(out.shape[2:])


def _traced(call: Callable[[], object], existing: list[torch.Tensor]) -> tuple[object, int, int]:
    """A call's result, its temporaries (the most it held beyond that result and what `existing` holds) and its
    float64 gold's convolution workspace."""
    with torch.no_grad(), LiveBytes([t for t in existing if isinstance(t, torch.Tensor)]) as live:
        out = call()
    return out, max(0, live.peak - _nbytes(as_outputs(out))), live.gold_workspace


def kernelbench_footprint(module: object) -> Footprint:
    """Inputs, outputs, parameters and temporaries of a KernelBench `Model`, built on the meta device."""
    with torch.device("meta"):
        inputs = list(module.get_inputs())  # type: ignore[attr-defined]
        model = module.Model(*module.get_init_inputs())  # type: ignore[attr-defined]
        state = list(model.parameters()) + list(model.buffers())
        outputs, temporaries, workspace = _traced(lambda: model(*inputs), inputs + state)
    return Footprint(_nbytes(inputs), _nbytes(outputs), _nbytes(state), temporaries, workspace)


REAL_DRAW_ELEMENTS = 1 << 22  # shapes up to this many elements are sized by one real draw (no meta-device import)


def native_footprint(problem: Problem, shape: tuple[int, ...], dtype: str) -> Footprint:
    """Inputs and outputs of a native problem at one shape: one real draw for small shapes (the meta
    device's first use imports torch's meta kernels, seconds per process), else on the meta device,
    falling back to a real draw for a reference the meta device cannot run."""
    module = problem.module
    elements = 1
    for dim in shape:
        elements *= dim
    if elements > REAL_DRAW_ELEMENTS:
        try:
            inputs = list(module.make_inputs(shape, torch_dtype(dtype), "meta", seeded_generator(0)))
            outputs, temporaries, workspace = _traced(lambda: module.reference(*inputs), inputs)
            return Footprint(_nbytes(inputs), _nbytes(as_outputs(outputs)), 0, temporaries, workspace)
        except Exception:  # noqa: BLE001 - a reference the meta device cannot run: measure one real call
            pass
    inputs = list(module.make_inputs(shape, torch_dtype(dtype), "cpu", seeded_generator(0)))
    outputs, temporaries, workspace = _traced(lambda: module.reference(*inputs), inputs)
    return Footprint(_nbytes(inputs), _nbytes(as_outputs(outputs)), 0, temporaries, workspace)


def largest_footprint(problem: Problem) -> Footprint:
    """The footprint of the problem's largest (shape, dtype), checks and benchmarks alike."""
    if problem.kind == "kernelbench":
        assert problem.module is not None
        return kernelbench_footprint(problem.module)
    prints = [
        native_footprint(problem, shape, dtype) for dtype in problem.dtypes for shape in problem.all_check_shapes()
    ]
    return max(prints, key=lambda f: f.needed)


def gold_fits(footprint: Footprint, budget_bytes: int | None = None) -> bool:
    """Whether the float64 gold of the largest case fits the memory budget too (else: same-dtype reference)."""
    return footprint.needed <= (budget_bytes if budget_bytes is not None else available_bytes())


def available_bytes() -> int:
    """Host memory this process may still use: MemAvailable, capped by a cgroup memory limit if one is set."""
    available = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except OSError:
        pass
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(limit_file) as handle:
                text = handle.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < available:
            available = int(text)
    return available


def device_bytes(device: str) -> int | None:
    """Free memory of the GPU the evaluation would use, or None on a CPU."""
    if device != "cuda" or not torch.cuda.is_available():
        return None
    free, _total = torch.cuda.mem_get_info()
    return int(free)


def refusal(
    problem: Problem,
    device: str,
    budget_bytes: int | None = None,
    footprint: Footprint | None = None,
    available: int | None = None,
) -> StatusError | None:
    """The refusal to raise, with its one-line reason and typed numbers, when the problem cannot be evaluated
    within the memory here; else None. Without a budget it is compared with `available` (default: the host's
    available memory now)."""
    try:
        footprint = footprint or largest_footprint(problem)
    except Exception as exc:  # noqa: BLE001 - a problem whose sizes cannot even be built on meta
        reason = f"cannot size the problem's working set: {type(exc).__name__}: {str(exc)[:200]}"
        return StatusError(Status.REJECTED, reason, Refusal(RefusalKind.UNSIZABLE))
    if budget_bytes is not None:
        budget = budget_bytes
    else:
        budget = available if available is not None else available_bytes()
    needed = footprint.needed_without_gold
    if needed > budget:
        where = "the --memory-budget" if budget_bytes is not None else "this host's available memory"
        reason = (
            f"too large for this machine: {footprint.describe()}; an evaluation needs "
            f"about {_gb(needed)} of host memory and {where} "
            f"is {_gb(budget)} (raise it with --memory-budget GB, or shrink the problem's sizes)"
        )
        return StatusError(Status.REJECTED, reason, Refusal(RefusalKind.TOO_LARGE, needed, budget, "host"))
    on_device = device_bytes(device)
    needed = 2 * (footprint.inputs + footprint.outputs) + footprint.parameters
    if on_device is not None and needed > on_device:
        reason = f"too large for the GPU: {footprint.describe()} and {_gb(on_device)} free on the device"
        return StatusError(Status.REJECTED, reason, Refusal(RefusalKind.TOO_LARGE, needed, on_device, "device"))
    return None
