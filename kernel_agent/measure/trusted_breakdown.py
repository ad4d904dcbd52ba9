"""torch.profiler over a few calls of TRUSTED code (the baseline, or a kernel the user vouches for), in
this process: `kernel-agent profile`'s operator table. Candidates are profiled inside their sandbox
(`op_breakdown.py`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernel_agent.measure.error import ProfileError
from kernel_agent.problem.load import Problem, Shape, import_file


def _load_trusted(problem: Problem, source: str | Path | Callable[..., Any], device: str) -> Callable[..., Any]:
    if callable(source):
        return source
    path = Path(source)
    module = import_file(path, f"kernel_agent_profiled_{abs(hash(str(path)))}")
    if problem.kind == "kernelbench":
        cls = getattr(module, "Model", None) or getattr(module, "ModelNew", None)
        if cls is None:
            raise ProfileError(f"{path}: defines neither Model nor ModelNew")
        return cls(*problem.module.get_init_inputs()).to(device).eval()
    fn = getattr(module, "kernel", None)
    if not callable(fn):
        raise ProfileError(f"{path}: defines no callable `kernel`")
    return fn


def profiler_breakdown(
    problem: Problem,
    source_path_or_callable: str | Path | Callable[..., Any],
    shape: Shape,
    dtype: str,
    device: str,
    calls: int = 3,
    top: int = 8,
) -> dict[str, Any]:
    """torch.profiler over `calls` calls of a kernel: top operators by self time, counts, launches.

    TRUSTED CODE ONLY: this imports and runs the kernel in this process, with no
    sandbox. Use it on the problem's own baseline (or a kernel the user vouches
    for); candidates are profiled inside their sandbox (EvalOptions.profile_calls).

    Time spent outside torch operators (a ctypes C++ kernel, Python) is invisible to
    the operator table; it is reported as `outside_ops_ms_per_call`.
    """
    from kernel_agent.measure.op_breakdown import op_breakdown
    from kernel_agent.problem.oracle import CaseMaker, fresh_seed

    if device == "cuda" and not torch.cuda.is_available():
        raise ProfileError("no CUDA device is visible here")
    fn = _load_trusted(problem, source_path_or_callable, device)
    maker = CaseMaker(problem, "cpu")
    inputs = [t.to(device) for t in maker.inputs(shape, dtype, "normal", fresh_seed())]
    with torch.no_grad():
        fn(*inputs)  # warm-up: library loads, JIT compiles, autotuning
        if device == "cuda":
            torch.cuda.synchronize()
    result = op_breakdown(lambda: fn(*inputs), device, calls, top)
    return {"shape": list(shape), "dtype": dtype, **result, "trusted_only": True}
