"""How much memory a problem needs, known before anything runs, and whether it fits here.

A KernelBench file sized for a GPU can want tens of GB for one call. Every input,
output and parameter is first built on PyTorch's `meta` device (shapes and dtypes,
no storage), so the trusted side can refuse a problem that cannot fit with the
numbers and the flag to change, in seconds, instead of being killed by the kernel's
OOM killer with no verdict.

The peak estimate follows what an evaluation holds at once (measured by
benchmarks/kernelbench_scale.py): the orchestrator keeps one check case streaming
(inputs, their float64 copies, gold in float64, the same-dtype reference, the outputs
read back) and the reference model in two precisions; each of the two workers holds
its sealed input segment, the kernel's outputs, a private copy of the inputs during
checks, and its own model.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from kernel_agent.problem.load import Problem, as_outputs, seeded_generator, torch_dtype

GB = 1 << 30
BASE_BYTES = int(1.5 * GB)  # interpreters, torch, the prefaulted heap: per process, three processes
# Physical memory per byte of one call's inputs + outputs, measured with benchmarks/kernelbench_scale.py
# and each process's anonymous and shared resident memory sampled (level1/40_LayerNorm at 0.53 GB,
# level1/98_KLDivLoss at 2 GB, whose log and product temporaries are the worst seen: 10.4 GB in its worker). The sealed
# input segment is one memfd mapped by all three processes: counted once, though each RSS shows it.
SEGMENT_FACTOR = 1.0
ORCHESTRATOR_FACTOR = 2.5  # a check case's inputs and the same-dtype reference with its temporaries
GOLD_FACTOR = 3.0  # on top, for the float64 gold: the inputs' float64 copies and the gold's temporaries
WORKER_FACTOR = (
    3.5  # per worker: the kernel's temporaries and outputs (KLDivLoss: 3.45), and inputs up to 256 MB copied for checks
)
PARAMETER_FACTOR = 6.0  # x parameters in all: model + float64 gold model + sealed state segment + two workers' models


@dataclass(frozen=True)
class Footprint:
    """One call's working set for one (shape, dtype), and what an evaluation of it needs."""

    inputs: int
    outputs: int
    parameters: int

    @property
    def working_set(self) -> int:
        return self.inputs + self.outputs + self.parameters

    @property
    def needed(self) -> int:
        """Host memory for an evaluation whose check cases are compared with a float64 gold."""
        return self.needed_without_gold + int(GOLD_FACTOR * (self.inputs + self.outputs))

    @property
    def needed_without_gold(self) -> int:
        """Host memory when the largest cases are compared with the same-dtype reference only."""
        per_call = self.inputs + self.outputs
        return int(
            (SEGMENT_FACTOR + ORCHESTRATOR_FACTOR + 2 * WORKER_FACTOR) * per_call
            + PARAMETER_FACTOR * self.parameters
            + 3 * BASE_BYTES
        )

    def describe(self) -> str:
        return (
            f"one call's working set {_gb(self.working_set)} (inputs {_gb(self.inputs)}, "
            f"outputs {_gb(self.outputs)}, parameters {_gb(self.parameters)})"
        )


def _gb(n: int) -> str:
    return f"{n / GB:.2f} GB" if n >= GB // 100 else f"{n / (1 << 20):.1f} MB"


def _nbytes(tensors: object) -> int:
    if isinstance(tensors, torch.Tensor):
        return tensors.numel() * tensors.element_size()
    if isinstance(tensors, (list, tuple)):
        return sum(_nbytes(t) for t in tensors)
    return 0


def kernelbench_footprint(module: object) -> Footprint:
    """Inputs, outputs and parameters of a KernelBench `Model`, built on the meta device."""
    with torch.device("meta"):
        inputs = list(module.get_inputs())  # type: ignore[attr-defined]
        model = module.Model(*module.get_init_inputs())  # type: ignore[attr-defined]
        outputs = model(*inputs)
    state = list(model.parameters()) + list(model.buffers())
    return Footprint(_nbytes(inputs), _nbytes(outputs), _nbytes(state))


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
            return Footprint(_nbytes(inputs), _nbytes(as_outputs(module.reference(*inputs))), 0)
        except Exception:  # noqa: BLE001 - a reference the meta device cannot run: measure one real call
            pass
    inputs = list(module.make_inputs(shape, torch_dtype(dtype), "cpu", seeded_generator(0)))
    with torch.no_grad():
        outputs = as_outputs(module.reference(*inputs))
    return Footprint(_nbytes(inputs), _nbytes(outputs), 0)


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


TOO_LARGE = "too large for"  # how every refusal for size begins (optimize ends such a kernel `too_large`)


def refusal(
    problem: Problem, device: str, budget_bytes: int | None = None, footprint: Footprint | None = None
) -> str | None:
    """A one-line reason when the problem cannot be evaluated within the memory here, else None."""
    try:
        footprint = footprint or largest_footprint(problem)
    except Exception as exc:  # noqa: BLE001 - a problem whose sizes cannot even be built on meta
        return f"cannot size the problem's working set: {type(exc).__name__}: {str(exc)[:200]}"
    budget = budget_bytes if budget_bytes is not None else available_bytes()
    if footprint.needed_without_gold > budget:
        where = "the --memory-budget" if budget_bytes is not None else "this host's available memory"
        return (
            f"{TOO_LARGE} this machine: {footprint.describe()}; an evaluation needs "
            f"about {_gb(footprint.needed_without_gold)} of host memory and {where} "
            f"is {_gb(budget)} (raise it with --memory-budget GB, or shrink the problem's sizes)"
        )
    on_device = device_bytes(device)
    if on_device is not None and 2 * (footprint.inputs + footprint.outputs) + footprint.parameters > on_device:
        return f"{TOO_LARGE} the GPU: {footprint.describe()} and {_gb(on_device)} free on the device"
    return None
