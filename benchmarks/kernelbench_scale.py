"""KernelBench at its published sizes: one honest verdict per problem, with memory and time measured.

Usage: python benchmarks/kernelbench_scale.py PATH/TO/KernelBench [--problems NAME ...] [--out FILE.md]

PATH is a checkout of the public ScalingIntelligence/KernelBench repository (not a pip package;
CI never needs it). For each problem, an honest candidate (the file's own `Model` copied as
`ModelNew`) is evaluated in a fresh orchestrator process, so each row's peak memory is its own:
status, one call's working set (from the meta device), the host's peak memory in use above idle
beside the footprint's estimate of it (what decides a refusal), peak resident memory of the
orchestrator and of each worker, wall time by phase, and system time. The default list spans 24 MB to
12 GB of working set; problems that cannot fit this machine must be refused in seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

# Ordered by one call's working set (inputs + outputs + parameters, from the meta device): level 1 and 2
# hold nothing under 24 MB; 16 problems from 24 MB to 2 GB, then five that cannot fit a 24 GB host.
DEFAULT = [
    "level2/96_ConvTranspose3d_Multiply_Max_GlobalAvgPool_Clamp.py",  # 24 MB
    "level2/92_Conv2d_GroupNorm_Tanh_HardSwish_ResidualAdd_LogSumExp.py",  # 72 MB
    "level1/12_Matmul_with_diagonal_matrices_.py",  # 128 MB
    "level2/45_Gemm_Sigmoid_LogSumExp.py",  # 176 MB
    "level2/67_Conv2d_GELU_GlobalAvgPool.py",  # 256 MB
    "level2/12_Gemm_Multiply_LeakyReLU.py",  # 320 MB (256 MB of weights)
    "level2/99_Matmul_GELU_Softmax.py",  # 320 MB (256 MB of weights)
    "level1/8_Matmul_with_irregular_shapes_.py",  # 344 MB
    "level1/88_MinGPTNewGelu.py",  # 512 MB
    "level1/95_CrossEntropyLoss.py",  # 512 MB
    "level1/40_LayerNorm.py",  # 544 MB
    "level2/65_Conv2d_AvgPool_Sigmoid_Sum.py",  # 576 MB
    "level1/6_Matmul_with_large_K_dimension_.py",  # 1 GB
    "level2/66_Matmul_Dropout_Softmax.py",  # 1 GB (16 MB per call, 1 GB of weights)
    "level1/82_conv_depthwise_2D_square_input_square_kernel.py",  # 2 GB
    "level1/98_KLDivLoss.py",  # 2 GB
    "level1/9_Tall_skinny_matrix_multiplication_.py",  # 4 GB
    "level1/41_Max_Pooling_1D.py",  # 6 GB
    "level1/97_ScaledDotProductAttention.py",  # 8 GB
    "level1/19_ReLU.py",  # 12 GB
    "level1/23_Softmax.py",  # 12 GB
]

ONE = r"""
import json, resource, sys, time
from pathlib import Path
from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.footprint import available_bytes, gold_fits, largest_footprint
from kernel_agent.problem.load import load_problem
path = Path(sys.argv[1])
began = time.perf_counter()
problem = load_problem(path)
budget = json.loads(sys.argv[4])
try:
    fp = largest_footprint(problem)
    working, temporaries = fp.working_set, fp.temporaries
    budget_bytes = int(budget * (1 << 30)) if budget is not None else available_bytes()
    estimate = fp.needed if gold_fits(fp, budget_bytes) else fp.needed_without_gold
except Exception:
    working = temporaries = estimate = None
verdict = evaluate(problem, path.read_text() + "\n\nModelNew = Model\n",
                   EvalOptions(sandbox_root=Path(sys.argv[2]), timeout=float(sys.argv[3]),
                               memory_budget=budget))
usage = resource.getrusage(resource.RUSAGE_SELF)
accounts = verdict.accounting or {}
print(json.dumps({
    "status": verdict.status, "reason": verdict.reason, "speedup": verdict.speedup,
    "working_set": working, "temporaries": temporaries, "estimate": estimate,
    "orchestrator_peak_mb": usage.ru_maxrss / 1024, "system_s": usage.ru_stime, "wall_s": time.perf_counter() - began,
    "durations": verdict.durations,
    "worker_peak_mb": {role: acc.get("peak_rss_mb") for role, acc in accounts.items()},
}))
"""


def gb(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n / (1 << 30):.2f} GB" if n >= 1 << 28 else f"{n / (1 << 20):.0f} MB"


def used_bytes() -> int:
    """The host's memory in use (MemTotal - MemAvailable): what the footprint's estimate must cover."""
    fields = {}
    with open("/proc/meminfo") as handle:
        for line in handle:
            name, value = line.split(":", 1)
            fields[name] = int(value.split()[0]) * 1024
    return fields["MemTotal"] - fields["MemAvailable"]


class HostPeak(threading.Thread):
    """The most host memory in use above what was in use when it started, sampled every 0.2 s while one
    problem's evaluation runs (all three of its processes, the shared segment once)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.idle = used_bytes()
        self.peak = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            self.peak = max(self.peak, used_bytes() - self.idle)

    def stop(self) -> int:
        self.done.set()
        self.join()
        return self.peak


def within_bound(row: dict) -> str:
    """The issue's memory goal: every process at most 4x one call's working set plus a 1.5 GB base; the
    working set here counts the temporaries a call holds at its peak too (a level 2 model's activations)."""
    working = row.get("working_set")
    if not working or row.get("orchestrator_peak_mb") is None:
        return "-"
    bound_mb = 4 * (working + (row.get("temporaries") or 0)) / (1 << 20) + 1536
    peaks = [row["orchestrator_peak_mb"], *[p for p in (row.get("worker_peak_mb") or {}).values() if p]]
    worst = max(peaks)
    return f"{bound_mb / 1024:.1f} GB: {'within' if worst <= bound_mb else 'OVER'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernelbench", type=Path, help="a checkout of ScalingIntelligence/KernelBench")
    parser.add_argument("--problems", nargs="*", default=DEFAULT)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument(
        "--memory-budget", type=float, default=None, help="GB one evaluation may use (default: what is available)"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    root = args.kernelbench / "KernelBench" if (args.kernelbench / "KernelBench").is_dir() else args.kernelbench
    rows = []
    header = (
        "| problem | status | working set | temporaries | host peak / estimate | orchestrator peak "
        "| worker peak (cand / base) | wall | bound: 4x (working set + temporaries) + 1.5 GB "
        "| start / verify / timing | system | reason |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    print(header, flush=True)
    for name in args.problems:
        path = root / name
        started = time.perf_counter()
        host = HostPeak()
        host.start()
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                ONE,
                str(path),
                str(Path("sandbox").resolve()),
                str(args.timeout),
                json.dumps(args.memory_budget),
            ],
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - started
        host_peak = host.stop()
        try:
            row = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            row = {
                "status": f"no verdict (exit {proc.returncode})",
                "reason": proc.stderr.strip().splitlines()[-1][:200] if proc.stderr.strip() else "",
            }
        d = row.get("durations") or {}
        peaks = row.get("worker_peak_mb") or {}
        over = " OVER" if row.get("estimate") and host_peak > row["estimate"] else ""
        line = (
            f"| {name} | {row['status']} | {gb(row.get('working_set'))} | {gb(row.get('temporaries'))} | "
            f"{gb(host_peak)} / {gb(row.get('estimate'))}{over} | "
            f"{row.get('orchestrator_peak_mb', 0):.0f} MB | "
            f"{peaks.get('candidate') or '-'} / {peaks.get('baseline') or '-'} MB | {wall:.1f} s | "
            f"{within_bound(row)} | "
            f"{d.get('sandbox_start', 0):.1f} / {d.get('verification', 0):.1f} / {d.get('timing', 0):.1f} s | "
            f"{row.get('system_s', 0):.1f} s | "
            f"{(row.get('reason') or '')[:120]} |"
        )
        print(line, flush=True)
        lines.append(line)
        rows.append({"problem": name, "wall_s": wall, "host_peak": host_peak, **row})
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
