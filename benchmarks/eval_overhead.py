"""Where the time of one evaluation goes, and how wide the A/A speedup spread is.

Usage: python benchmarks/eval_overhead.py [PROBLEM] [--repeats N]
Evaluates the problem's baseline against itself N times (an A/A test): every
speedup should be near 1.0 and every interval should contain 1.0.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import load_problem

PHASES = ("compile", "reference", "sandbox_start", "verification", "timing")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", nargs="?", default="examples/cpp_softmax")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    problem = load_problem(args.problem)
    source = Path(problem.baseline_path).read_text()
    rows = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        verdict = evaluate(problem, source, EvalOptions())
        rows.append((verdict, time.perf_counter() - started))
    console = Console()
    phases = Table(
        title=(
            f"Time per evaluation, {problem.name} baseline vs itself, {args.repeats} runs (seconds, median [min, max])"
        )
    )
    for column in ("phase", "median", "min", "max"):
        phases.add_column(column, justify="right" if column != "phase" else "left")
    for phase in (*PHASES, "total"):
        values = [wall if phase == "total" else v.durations.get(phase, 0.0) for v, wall in rows]
        phases.add_row(phase, f"{statistics.median(values):.3f}", f"{min(values):.3f}", f"{max(values):.3f}")
    console.print(phases)
    spread = Table(title="A/A speedups (baseline against itself)")
    for column in ("run", "status", "speedup", "95% CI", "contains 1.0", "base median ms", "cand median ms"):
        spread.add_column(column)
    for index, (verdict, _) in enumerate(rows, 1):
        low, high = verdict.speedup_ci or (float("nan"), float("nan"))
        nan = float("nan")
        base_ms, cand_ms = (
            (verdict.timing.baseline.median_ms, verdict.timing.candidate.median_ms) if verdict.timing else (nan, nan)
        )
        spread.add_row(
            str(index),
            verdict.status,
            f"{verdict.speedup:.3f}" if verdict.speedup else "-",
            f"[{low:.3f}, {high:.3f}]",
            "yes" if low <= 1.0 <= high else "NO",
            f"{base_ms:.3f}",
            f"{cand_ms:.3f}",
        )
    console.print(spread)
    speedups = [v.speedup for v, _ in rows if v.speedup]
    if speedups:
        console.print(
            f"A/A speedup: median {statistics.median(speedups):.3f}, min {min(speedups):.3f}, max {max(speedups):.3f}; "
            "intervals containing 1.0: "
            f"{sum(1 for v, _ in rows if v.speedup_ci and v.speedup_ci[0] <= 1 <= v.speedup_ci[1])}/{len(rows)}; "
            f"falsely 'faster': {sum(1 for v, _ in rows if v.status == 'faster')}"
        )
    console.print(f"isolation: {rows[0][0].isolation}; device: {rows[0][0].environment['device_name']}")


if __name__ == "__main__":
    main()
