"""How often the trusted-clock cross-check flags an honest fast candidate, by number of rounds.

Usage: python benchmarks/timer_corroboration.py [PROBLEM CANDIDATE] [--rounds 4 10] [--repeats N]
Evaluates an honest candidate (default: softmax64's torch.softmax rewrite) N times per round
count and prints the verdicts and the per-call time each side spent outside its own timer
(the "unexplained" time the corroboration compares, as medians over the blocks it judges).
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import kernel_agent.measure as measure
from kernel_agent.evaluate import EvalOptions, evaluate
from kernel_agent.problem import load_problem

ROOT = Path(__file__).resolve().parent.parent


def record_blocks(log: list[dict[str, Any]]) -> None:
    """Keep what `_measure` hands the corroboration (ms per call, per block) for the table."""
    original = measure._timer_gap

    def spy(unexplained: dict, claimed: dict, calls: list[int]) -> str | None:
        log.append({role: [u / n for u, n in zip(unexplained[role], calls)] for role in ("baseline", "candidate")})
        return original(unexplained, claimed, calls)

    measure._timer_gap = spy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", nargs="?", default=str(ROOT / "tests" / "fixtures" / "softmax64"))
    parser.add_argument("candidate", nargs="?", default=str(ROOT / "tests" / "fixtures" / "candidates" / "faster.py"))
    parser.add_argument("--rounds", type=int, nargs="+", default=[4, 10])
    parser.add_argument("--repeats", type=int, default=8)
    args = parser.parse_args()
    problem = load_problem(args.problem)
    source = Path(args.candidate).read_text()
    log: list[dict[str, Any]] = []
    record_blocks(log)
    table = Table(title=f"{Path(args.candidate).name} on {problem.name}: {args.repeats} evaluations per row")
    for column in ("rounds", "verdicts", "median speedup", "baseline unexplained ms/call", "candidate unexplained ms/call"):
        table.add_column(column, justify="right" if column != "verdicts" else "left")
    for rounds in args.rounds:
        statuses: Counter[str] = Counter()
        speedups, base, cand = [], [], []
        for _ in range(args.repeats):
            log.clear()
            verdict = evaluate(problem, source, EvalOptions(rounds=rounds, sandbox_root=ROOT / "sandbox"))
            statuses[verdict.status] += 1
            if verdict.speedup:
                speedups.append(verdict.speedup)
            if log:
                base.append(statistics.median(log[-1]["baseline"]))
                cand.append(statistics.median(log[-1]["candidate"]))
        table.add_row(
            str(rounds), ", ".join(f"{s} {n}" for s, n in statuses.most_common()), f"{statistics.median(speedups):.2f}x" if speedups else "-",
            f"{statistics.median(base):.3f}" if base else "-", f"{statistics.median(cand):.3f}" if cand else "-",
        )
    Console().print(table)
    print("unexplained: time per call the orchestrator's clock saw beyond what the side claimed (medians over blocks after the first round)")


if __name__ == "__main__":
    main()
