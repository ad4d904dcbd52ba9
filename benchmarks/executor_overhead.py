"""Per-candidate overhead of the Ray executor against the local pool (CPU).

Usage: python benchmarks/executor_overhead.py [--candidates N]
The same N correct candidates of tests/fixtures/softmax64 go through the local pool
(one worker) and then through a local Ray instance (one CPU timing slot), one at a
time, so each wall time is one candidate's latency: submit -> verdict in hand. Ray's
start-up is reported apart; the first candidate on Ray also pays for its worker
process importing torch, so the steady state is the median of the rest. The
executor's own overhead is wall time minus the time spent inside `evaluate()`.

Ray runs a num_cpus=1 task with OMP_NUM_THREADS=1, so the trusted side of an
evaluation uses one torch thread there; `--orchestrator-threads 1` (the default)
does the same for the local pool, so both evaluate() columns do the same work.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]

from kernel_agent.evaluate.pipeline import EvalOptions  # noqa: E402
from kernel_agent.optimize.executors.local import LocalExecutor  # noqa: E402
from kernel_agent.problem.load import load_problem  # noqa: E402

EXPRESSIONS = [
    "torch.softmax(x, dim=-1)",
    "torch.softmax(x, -1)",
    "x.softmax(dim=-1)",
    "torch.nn.functional.softmax(x, dim=-1)",
    "torch.softmax(x.contiguous(), dim=-1)",
    "torch.softmax(x, dim=1)",
    "torch.special.softmax(x, dim=-1)",
    "x.softmax(-1)",
]


def candidate(expression: str) -> str:
    return f"import torch\n\n\ndef kernel(x):\n    return {expression}\n"


def one_at_a_time(executor, count: int) -> tuple[list[float], list[str], list[float]]:
    """Wall time per candidate, the verdicts, and the time each spent inside `evaluate` (Ray reports it)."""
    problem = load_problem(ROOT / "tests" / "fixtures" / "softmax64")
    options = EvalOptions(threads=1, sandbox_root=ROOT / "sandbox")
    walls, statuses, inside = [], [], []
    for index in range(count):
        started = time.perf_counter()
        verdict = executor.submit(problem, candidate(EXPRESSIONS[index % len(EXPRESSIONS)]), options).result()
        walls.append(time.perf_counter() - started)
        statuses.append(verdict.status)
        inside.append(sum(verdict.durations.values()))
    return walls, statuses, inside


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=6)
    parser.add_argument(
        "--orchestrator-threads",
        type=int,
        default=1,
        help="torch threads of this (the local pool's trusted) process; 0: torch's default",
    )
    args = parser.parse_args()
    if args.orchestrator_threads:
        import torch

        torch.set_num_threads(args.orchestrator_threads)
    console = Console()
    try:
        from kernel_agent.optimize.executors.ray import RayExecutor
    except ImportError:
        sys.exit("needs ray: pip install 'kernel-agent[cluster]'")

    results = {}
    started = time.perf_counter()
    local = LocalExecutor(1)
    local_start = time.perf_counter() - started
    results["local pool"] = (local_start, *one_at_a_time(local, args.candidates))
    local.shutdown()
    started = time.perf_counter()
    ray_executor = RayExecutor(None, 1, num_cpus=2)
    ray_start = time.perf_counter() - started
    results["ray (local)"] = (ray_start, *one_at_a_time(ray_executor, args.candidates))
    ray_executor.shutdown()

    table = Table(title=f"{args.candidates} correct softmax64 candidates, one at a time (CPU, 1 thread per kernel)")
    columns = (
        "executor",
        "start-up s",
        "first cand. s",
        "steady s/cand.",
        "mean s/cand.",
        "evaluate() s",
        "overhead s/cand.",
        "verdicts",
    )
    for column in columns:
        table.add_column(column)
    summary = {}
    for name, (start, walls, statuses, inside) in results.items():
        steady = statistics.median(walls[1:]) if len(walls) > 1 else walls[0]
        # Overhead: what the executor adds to each candidate beyond evaluate() itself (steady state).
        overhead = statistics.median([w - i for w, i in zip(walls[1:], inside[1:])] or [walls[0] - inside[0]])
        summary[name] = (start, walls[0], steady, statistics.mean(walls), statistics.median(inside), overhead)
        table.add_row(name, *(f"{v:.3f}" for v in summary[name]), ", ".join(sorted(set(statuses))))
    local_row, ray_row = summary["local pool"], summary["ray (local)"]
    table.add_row("ray - local", *(f"{r - q:+.3f}" for r, q in zip(ray_row, local_row)), "")
    console.print(table)
    console.print(
        "overhead = median over candidates 2..N of (wall - time inside evaluate()): for Ray, task dispatch, "
        "the worker reloading the problem and shipping the verdict back; for the pool, a thread hand-off."
    )


if __name__ == "__main__":
    main()
