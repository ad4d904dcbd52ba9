"""Where a kernel stands against the machine's limits: work counts, ceilings, roofline floors.

- `work_counts`: FLOPs (declared by the problem, else counted by torch's
  FlopCounterMode over the reference) and the minimum bytes a kernel must move
  (its inputs once plus its outputs once, or the problem's declared `bytes_moved`).
- `measure_ceilings`: this machine's memory bandwidth (a large copy) and matmul
  rate per dtype; `ceilings_to_dict` / `ceilings_from_dict` store them, keyed by
  `fingerprint_key`.
- `roofline`: the floor time max(flops / peak, bytes / bandwidth) and whether the
  shape is memory or compute bound; `fraction_of_floor` = floor / measured.
- `build_profile`: the compact dict shown in the prompt and by `kernel-agent profile`.
- `profiler_breakdown`: torch.profiler over a few calls of TRUSTED code (the baseline).

Only torch and numpy are needed here (no database, no LLM client).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernel_agent.core.config import check_known_fields
from kernel_agent.core.timing_result import TimingResult
from kernel_agent.measure.contention import contention, core_times
from kernel_agent.measure.op_breakdown import triton_compile_metadata  # noqa: F401 - re-exported: it belongs with the profile API
from kernel_agent.problem.load import Problem, Shape, as_outputs, import_file, seeded_generator, torch_dtype

FLOPS_SOURCES = ("declared", "flop_counter", "none")
SUSPICIOUS_SLACK = 0.9


class ProfileError(RuntimeError):
    """A profile step that cannot run (one-line reason)."""


# --- work counts -------------------------------------------------------------------------


@dataclass
class WorkCounts:
    """The work one call does at one shape: FLOPs, minimum bytes moved, and their ratio."""

    flops: int | None  # None when neither declared nor countable (e.g. elementwise ops FlopCounterMode ignores)
    bytes: int
    arithmetic_intensity: float | None  # FLOP per byte
    flops_source: str  # "declared" | "flop_counter" | "none"
    bytes_source: str = "io"  # "declared" | "io" (inputs + outputs, each once)


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
    source = "none"
    if callable(declared_flops):
        try:
            flops, source = int(declared_flops(shape)), "declared"
        except Exception as exc:
            raise ProfileError(f"{problem.name}: flops({shape}) failed: {type(exc).__name__}: {exc}") from None
    nbytes: int | None = None
    bytes_source = "io"
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


# --- ceilings -------------------------------------------------------------------------------


@dataclass
class Ceilings:
    """What this machine can do at best: copy bandwidth and matmul rate per dtype."""

    fingerprint: str  # fingerprint_key(device): the storage key
    device_name: str
    memory_gbps: float  # GB/s (1e9 bytes), bytes read + written by a large copy
    gflops: dict[str, float] = field(default_factory=dict)  # dtype -> GFLOP/s of a large matmul
    measured_at: str = ""  # ISO 8601, UTC
    device: str = "cpu"
    spread: float = 0.0  # how far two passes of the copy bandwidth differed, relative to the faster
    load: float = 0.0  # the share of the machine's cores other processes took while it was measured

    def higher(self, other: Ceilings) -> Ceilings:
        """The higher of two measurements of each ceiling (so the lower floor: a floor too low flags nothing
        honest, one too high flags it)."""
        rates = {d: max(self.gflops.get(d, 0.0), other.gflops.get(d, 0.0)) for d in {*self.gflops, *other.gflops}}
        return dataclasses.replace(
            other, memory_gbps=max(self.memory_gbps, other.memory_gbps), gflops=rates, spread=other.spread
        )

    def peak_gflops(self, dtype: str) -> tuple[float | None, str | None]:
        """The fastest measured matmul rate a `dtype` kernel could use, and its dtype.

        A kernel may compute in a wider type than its inputs (bfloat16 data through float32
        FMAs: torch's own CPU bfloat16 matmul runs ~100x slower than its float32 one here), so
        every measured dtype at least as wide counts. With none of those measured, the fastest
        rate of any dtype stands in (an optimistic ceiling: a floor too low, never too high)."""
        return peak_rate(self.gflops, dtype)


def peak_rate(gflops: dict[str, float], dtype: str) -> tuple[float | None, str | None]:
    """`Ceilings.peak_gflops` over a plain dtype -> GFLOP/s mapping (the report's stored copy)."""
    measured = {d: r for d, r in gflops.items() if r > 0}
    if not measured:
        return None, None
    width = _bits(dtype)
    usable = [d for d in measured if width is None or (_bits(d) or 0) >= width] or list(measured)
    best = max(usable, key=lambda d: (measured[d], d == dtype))
    return measured[best], best


def _bits(dtype: str) -> int | None:
    """Bits per element of a torch dtype name; None for a name torch does not know."""
    found = getattr(torch, dtype, None)
    return found.itemsize * 8 if isinstance(found, torch.dtype) else None


def fingerprint_key(device: str, threads: int | None = None) -> str:
    """The key ceilings are stored under: device name, torch version and thread count."""
    from kernel_agent.core.fingerprint import environment_key, fingerprint

    return environment_key(fingerprint(device, threads if threads is not None else torch.get_num_threads()))


def ceilings_to_dict(ceilings: Ceilings) -> dict[str, Any]:
    return asdict(ceilings)


def ceilings_from_dict(data: dict[str, Any]) -> Ceilings:
    """Decode stored ceilings strictly: unknown keys and non-positive rates are errors."""
    check_known_fields(Ceilings, data, "ceilings")
    bandwidth = data.get("memory_gbps")
    if not isinstance(bandwidth, (int, float)) or not bandwidth > 0:
        raise ValueError("ceilings need a positive memory_gbps")
    gflops = data.get("gflops", {})
    if not isinstance(gflops, dict) or not all(isinstance(v, (int, float)) and v > 0 for v in gflops.values()):
        raise ValueError("ceilings gflops must map dtype names to positive numbers")
    return Ceilings(
        fingerprint=str(data.get("fingerprint", "")),
        device_name=str(data.get("device_name", "")),
        memory_gbps=float(bandwidth),
        gflops={str(k): float(v) for k, v in gflops.items()},
        measured_at=str(data.get("measured_at", "")),
        device=str(data.get("device", "cpu")),
        spread=float(data.get("spread", 0.0)),
        load=float(data.get("load", 0.0)),
    )


def _best_seconds(fn: Callable[[], Any], repeats: int, device: str) -> float:
    """The fastest of `repeats` timed calls (after the caller's warm-up)."""
    if device == "cuda":
        times = []
        for _ in range(repeats):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1000)
        return min(times)
    best = math.inf
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - began)
    return best


CORES = os.cpu_count() or 1


def measure_bandwidth(device: str, nbytes: int | None = None, repeats: int | None = None) -> float:
    """GB/s of the best of several large copies, counting bytes read plus bytes written."""
    cuda = device == "cuda"
    nbytes = nbytes or ((1 << 30) if cuda else (256 << 20))
    repeats = repeats or (20 if cuda else 5)
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device)
    src.fill_(1.0)
    dst = torch.empty_like(src)
    dst.copy_(src)  # first touch and warm-up
    if cuda:
        torch.cuda.synchronize()
    seconds = _best_seconds(lambda: dst.copy_(src), repeats, device)
    moved = 2 * src.numel() * src.element_size()
    return moved / seconds / 1e9


def measure_matmul(device: str, dtype: str, n: int, repeats: int) -> float:
    """GFLOP/s of the best of `repeats` n x n matmuls."""
    dt = torch_dtype(dtype)
    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=torch.float32, generator=generator).to(dt)
    b = torch.randn(n, n, device=device, dtype=torch.float32, generator=generator).to(dt)
    out = torch.empty(n, n, device=device, dtype=dt)
    torch.matmul(a, b, out=out)  # warm-up: library init, heuristics, caches
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = _best_seconds(lambda: torch.matmul(a, b, out=out), repeats, device)
    return 2 * n**3 / seconds / 1e9


def _cpu_matmul_rate(dtype: str, budget_s: float, target_call_s: float = 0.04, repeats: int = 3) -> float | None:
    """Size a CPU matmul from a small probe so each of `repeats` calls takes about `target_call_s`;
    None when even the probe is too slow."""
    began = time.perf_counter()
    probe_n = 256
    probe = measure_matmul("cpu", dtype, probe_n, 1)
    left = budget_s - (time.perf_counter() - began)
    if left < 3 * (time.perf_counter() - began):
        return None  # too slow to measure within the budget (e.g. float16 without hardware support)
    n = max(probe_n, min(4096, int((target_call_s * probe * 1e9 / 2) ** (1 / 3)) // 128 * 128))
    while n > probe_n and (repeats + 1) * 2 * n**3 / (probe * 1e9) > left:
        n = max(probe_n, n // 2 // 128 * 128)
    return max(probe, measure_matmul("cpu", dtype, n, repeats))


def measure_ceilings(device: str, budget_s: float = 2.0, threads: int | None = None) -> Ceilings:
    """Measure the memory bandwidth and matmul rates of `device` ("cpu" or "cuda") now.

    CPU: a 256 MiB copy (best of 5) and float32 matmuls sized to ~40 ms a call;
    bfloat16 too when a probe says it fits in what is left of `budget_s`.
    CUDA: a 1 GiB copy and 8192^2 matmuls in float32 (TF32 off), float16 and
    bfloat16, timed with CUDA events (best of several).
    `threads`: the CPU thread count the kernels will run with (the fingerprint's), default all.
    """
    from kernel_agent.core.fingerprint import device_name

    before = core_times(None)
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ProfileError("no CUDA device is visible here; measure ceilings on cpu")
        gbps = measure_bandwidth("cuda")
        rates: dict[str, float] = {}
        previous = torch.get_float32_matmul_precision()
        try:
            torch.set_float32_matmul_precision("highest")  # TF32 off: the float32 ceiling is true float32
            rates["float32"] = measure_matmul("cuda", "float32", 8192, 5)
        finally:
            torch.set_float32_matmul_precision(previous)
        for dtype in ("float16", "bfloat16"):
            rates[dtype] = measure_matmul("cuda", dtype, 8192, 20)
        torch.cuda.empty_cache()
    elif device == "cpu":
        saved = torch.get_num_threads()
        torch.set_num_threads(threads or saved)
        try:
            began = time.perf_counter()
            gbps = measure_bandwidth("cpu")
            rates = {}
            rate = _cpu_matmul_rate("float32", max(0.5, budget_s - (time.perf_counter() - began)))
            if rate is not None:
                rates["float32"] = rate
            left = budget_s - (time.perf_counter() - began)
            if left > 0.3:
                rate = _cpu_matmul_rate("bfloat16", left)
                if rate is not None:
                    rates["bfloat16"] = rate
        finally:
            torch.set_num_threads(saved)
    else:
        raise ProfileError(f"device must be cpu or cuda, not {device!r}")
    second = measure_bandwidth(device)  # a second pass: how far one measurement is from the next
    busy = contention(before, core_times(None), 0, CORES)
    return Ceilings(
        fingerprint=fingerprint_key(device, threads),
        device_name=device_name(device),
        memory_gbps=max(gbps, second),
        gflops=rates,
        measured_at=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        device=device,
        spread=round(abs(gbps - second) / max(gbps, second), 4),
        load=round(busy.other, 4),
    )


# --- roofline -------------------------------------------------------------------------------


def roofline(counts: WorkCounts, ceilings: Ceilings, dtype: str) -> dict[str, Any]:
    """The floor time of one call: max(flops / peak, bytes / bandwidth), and which term binds."""
    memory_ms = counts.bytes / (ceilings.memory_gbps * 1e9) * 1e3
    peak, peak_dtype = ceilings.peak_gflops(dtype)
    compute_ms = counts.flops / (peak * 1e9) * 1e3 if counts.flops and peak else None
    floor_ms = max(memory_ms, compute_ms or 0.0)
    return {
        "floor_ms": floor_ms,
        "bound": "compute" if compute_ms is not None and compute_ms > memory_ms else "memory",
        "memory_floor_ms": memory_ms,
        "compute_floor_ms": compute_ms,
        "ridge_intensity": peak / ceilings.memory_gbps if peak else None,  # FLOP/byte where the two floors meet
        "peak_gflops": peak,
        "peak_dtype": peak_dtype,
        "memory_gbps": ceilings.memory_gbps,
    }


def fraction_of_floor(measured_ms: float | None, floor_ms: float | None) -> float | None:
    """floor / measured: in (0, 1] for an honest kernel, 1 = at the roofline; > 1 is faster than physics allows."""
    if not _positive(measured_ms) or not _positive(floor_ms):
        return None
    return float(floor_ms) / float(measured_ms)


def is_faster_than_floor(measured_ms: float | None, floor_ms: float | None, slack: float = SUSPICIOUS_SLACK) -> bool:
    """True when a measured time beats the floor by more than the slack (measured < slack * floor): suspicious."""
    if not _positive(measured_ms) or not _positive(floor_ms):
        return False
    return float(measured_ms) < slack * float(floor_ms)


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


# --- the profile the prompt shows --------------------------------------------------------------


def shape_rows(problem: Problem, timing: TimingResult | None, ceilings: Ceilings | None) -> list[dict[str, Any]]:
    """One structured row per benchmark shape (first dtype): counts, floor, and the timing's rates."""
    dtype = problem.dtypes[0]
    per_shape = {tuple(e.shape): e for e in (timing.per_shape if timing is not None else []) if e.dtype == dtype}
    rows = []
    for shape in problem.shapes:
        counts = work_counts(problem, shape, dtype)
        row: dict[str, Any] = {
            "shape": list(shape),
            "dtype": dtype,
            "flops": counts.flops,
            "bytes": counts.bytes,
            "intensity": counts.arithmetic_intensity,
            "flops_source": counts.flops_source,
            "bytes_source": counts.bytes_source,
        }
        if ceilings is not None:
            line = roofline(counts, ceilings, dtype)
            row.update(floor_ms=line["floor_ms"], bound=line["bound"])
        entry = per_shape.get(tuple(shape))
        if entry is not None:
            for role in ("baseline", "candidate"):
                ms = getattr(entry, f"{role}_median_ms")
                if not _positive(ms):
                    continue
                row[f"{role}_median_ms"] = ms
                row[f"{role}_gbps"] = counts.bytes / (ms * 1e-3) / 1e9
                row[f"{role}_gflops"] = counts.flops / (ms * 1e-3) / 1e9 if counts.flops else None
                if "floor_ms" in row:
                    row[f"{role}_fraction_of_floor"] = fraction_of_floor(ms, row["floor_ms"])
                    row[f"{role}_faster_than_floor"] = is_faster_than_floor(ms, row["floor_ms"])
        rows.append(row)
    return rows


ROOFLINE_KEYS = (
    "shape",
    "dtype",
    "flops",
    "bytes",
    "intensity",
    "floor_ms",
    "bound",
    "baseline_median_ms",
    "candidate_median_ms",
)


def roofline_record(rows: list[dict[str, Any]], ceilings: Ceilings) -> dict[str, Any]:
    """What a verdict stores for the report's roofline chart: the ceilings and, per shape, work and times."""
    return {
        "device": ceilings.device_name,
        "fingerprint": ceilings.fingerprint,
        "memory_gbps": ceilings.memory_gbps,
        "gflops": dict(ceilings.gflops),
        "shapes": [{k: row[k] for k in ROOFLINE_KEYS if row.get(k) is not None} for row in rows],
    }


def _label(row: dict[str, Any]) -> str:
    return "shape " + "x".join(str(d) for d in row["shape"]) + f" ({row['dtype']})"


def _round(value: Any, digits: int = 4) -> Any:
    if isinstance(value, float) and math.isfinite(value):
        return float(f"{value:.{digits}g}")
    return value


def build_profile(
    problem: Problem,
    timing: TimingResult | None,
    device: str,
    ceilings: Ceilings | None,
    rows: list[dict[str, Any]] | None = None,
    role: str = "baseline",
    breakdown: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The compact profile of the baseline (or, role="candidate", of a candidate) that the prompt renders.

    Top-level keys are the ones the prompt summarises: `{role}_median_ms`,
    `{role}_p20_ms`, `{role}_p80_ms` (the timing's overall summary for that side),
    `bound` ("memory", "compute" or "mixed" across shapes) and `fraction_of_floor`
    (geometric mean over shapes, like the speedup). Then one key per benchmark
    shape, "shape 1024x1024 (float32)", holding flops, bytes, intensity,
    floor_ms, bound, median_ms, achieved_gbps, achieved_gflops and
    fraction_of_floor; then `ceilings`, the operator breakdown when one is given
    and, when the kernel beats a floor, `warning`.
    """
    rows = rows if rows is not None else shape_rows(problem, timing, ceilings)
    profile: dict[str, Any] = {}
    summary = timing.summary(role) if timing is not None else None
    if summary is not None and _positive(summary.median_ms):
        for key in ("median_ms", "p20_ms", "p80_ms"):
            if _positive(getattr(summary, key)):
                profile[f"{role}_{key}"] = _round(getattr(summary, key))
    bounds = {row["bound"] for row in rows if "bound" in row}
    if bounds:
        profile["bound"] = bounds.pop() if len(bounds) == 1 else "mixed"
    fractions = [row[f"{role}_fraction_of_floor"] for row in rows if _positive(row.get(f"{role}_fraction_of_floor"))]
    if fractions and len(fractions) == len(rows):
        profile["fraction_of_floor"] = _round(math.exp(statistics.fmean(math.log(f) for f in fractions)), 3)
    for row in rows:
        compact = {"flops": row["flops"], "bytes": row["bytes"], "intensity": _round(row["intensity"], 3)}
        if "floor_ms" in row:
            compact.update(floor_ms=_round(row["floor_ms"]), bound=row["bound"])
        if f"{role}_median_ms" in row:
            compact.update(
                median_ms=_round(row[f"{role}_median_ms"]),
                achieved_gbps=_round(row[f"{role}_gbps"]),
                achieved_gflops=_round(row[f"{role}_gflops"]),
            )
            if row.get(f"{role}_fraction_of_floor") is not None:
                compact["fraction_of_floor"] = _round(row[f"{role}_fraction_of_floor"], 3)
        profile[_label(row)] = {k: v for k, v in compact.items() if v is not None}
    if ceilings is not None and role == "baseline":  # shown once per prompt
        profile["ceilings"] = {
            "device": ceilings.device_name,
            "memory_gbps": _round(ceilings.memory_gbps),
            "gflops": {k: _round(v) for k, v in ceilings.gflops.items()},
        }
    from kernel_agent.measure.op_breakdown import compiled_line, summary_line

    operators = summary_line(breakdown)
    if operators:
        profile["top operators by self time"] = operators
    compiled = compiled_line(breakdown)
    if compiled:
        profile["compiled Triton kernels"] = compiled
    fast = [_label(row) for row in rows if row.get(f"{role}_faster_than_floor")]
    if fast:
        who = "the baseline" if role == "baseline" else "this kernel"
        profile["warning"] = (
            f"{who} beats the roofline floor at {', '.join(fast)}: the declared flops/bytes or the ceilings are off"
        )
    del device  # the ceilings carry their device; kept in the signature for callers that pick ceilings by device
    return profile


# --- torch.profiler over trusted code ---------------------------------------------------------------


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
