"""KernelBench at its published sizes: one honest verdict per problem, with memory and time measured.

Usage: python benchmarks/kernelbench_scale.py PATH/TO/KernelBench [--problems NAME ...] [--out FILE.md]

PATH is a checkout of the public ScalingIntelligence/KernelBench repository (not a pip package;
CI never needs it). For each problem, an honest candidate (the file's own `Model` copied as
`ModelNew`) is evaluated in a fresh orchestrator process, so each row's peak memory is its own:
status, one call's working set (from the meta device), peak resident memory of the orchestrator
and of each worker, wall time by phase, and system time. The default list spans about 8 MB to
12 GB of working set; problems that cannot fit this machine must be refused in seconds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

DEFAULT = [
    "level1/8_Matmul_with_irregular_shapes_.py",
    "level1/23_Softmax.py",
    "level1/24_LogSoftmax.py",
    "level1/26_GELU_.py",
    "level1/36_RMSNorm_.py",
    "level1/40_LayerNorm.py",
    "level1/41_Max_Pooling_1D.py",
    "level1/47_Sum_reduction_over_a_dimension.py",
    "level1/88_MinGPTNewGelu.py",
    "level1/95_CrossEntropyLoss.py",
    "level1/9_Tall_skinny_matrix_multiplication_.py",
    "level1/19_ReLU.py",
    "level1/97_ScaledDotProductAttention.py",
    "level2/66_Matmul_Dropout_Softmax.py",
    "level2/12_Gemm_Multiply_LeakyReLU.py",
    "level2/99_Matmul_GELU_Softmax.py",
]

ONE = r"""
import json, resource, sys, time
from pathlib import Path
from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.footprint import largest_footprint
from kernel_agent.problem.load import load_problem
path = Path(sys.argv[1])
began = time.perf_counter()
problem = load_problem(path)
try:
    fp = largest_footprint(problem)
    working = fp.working_set
except Exception:
    working = None
verdict = evaluate(problem, path.read_text() + "\n\nModelNew = Model\n",
                   EvalOptions(sandbox_root=Path(sys.argv[2]), timeout=float(sys.argv[3]),
                               memory_budget=json.loads(sys.argv[4])))
usage = resource.getrusage(resource.RUSAGE_SELF)
accounts = verdict.accounting or {}
print(json.dumps({
    "status": verdict.status, "reason": verdict.reason, "speedup": verdict.speedup, "working_set": working,
    "orchestrator_peak_mb": usage.ru_maxrss / 1024, "system_s": usage.ru_stime, "wall_s": time.perf_counter() - began,
    "durations": verdict.durations,
    "worker_peak_mb": {role: acc.get("peak_rss_mb") for role, acc in accounts.items()},
}))
"""


def gb(n: float | None) -> str:
    if n is None:
        return "-"
    return f"{n / (1 << 30):.2f} GB" if n >= 1 << 28 else f"{n / (1 << 20):.0f} MB"


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
        "| problem | status | working set | orchestrator peak | worker peak (cand / base) | wall "
        "| start / verify / timing | system | reason |"
    )
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    print(header, flush=True)
    for name in args.problems:
        path = root / name
        started = time.perf_counter()
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
        try:
            row = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            row = {
                "status": f"no verdict (exit {proc.returncode})",
                "reason": proc.stderr.strip().splitlines()[-1][:200] if proc.stderr.strip() else "",
            }
        d = row.get("durations") or {}
        peaks = row.get("worker_peak_mb") or {}
        line = (
            f"| {name} | {row['status']} | {gb(row.get('working_set'))} | "
            f"{row.get('orchestrator_peak_mb', 0):.0f} MB | "
            f"{peaks.get('candidate') or '-'} / {peaks.get('baseline') or '-'} MB | {wall:.1f} s | "
            f"{d.get('sandbox_start', 0):.1f} / {d.get('verification', 0):.1f} / {d.get('timing', 0):.1f} s | "
            f"{row.get('system_s', 0):.1f} s | "
            f"{(row.get('reason') or '')[:120]} |"
        )
        print(line, flush=True)
        lines.append(line)
        rows.append(row)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
