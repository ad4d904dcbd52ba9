"""False accepts of honest copies with and without the fresh-pair confirmation (timing/confirmation.py).

Usage: python benchmarks/confirmation_aa.py [--runs N] [--sandbox DIR]

Each candidate does the baseline's own work, so a `faster` verdict is a false accept. One evaluation
gives both answers: the first pair's verdict is what the harness said before confirmation existed
(it is kept under `timing.pairs` when a second pair ran), the final verdict is what it says now.
A true gain (tests/fixtures/candidates/fused_softmax64.py, about 1.4x) is the control: it must stay
`faster`. Every verdict goes through the real evaluation path (sandbox, checks, A/B timing).
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
from kernel_agent.timing.confirmation import CONFIRM_BELOW

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "tests" / "fixtures" / "softmax64"
CANDIDATES = {
    "baseline copy": SOFTMAX / "kernel.py",
    "b26 warm-up sleeper": ROOT / "tests" / "adversarial" / "fixtures" / "b26_warmup_inflation.py",
    "fused softmax (true gain)": ROOT / "tests" / "fixtures" / "candidates" / "fused_softmax64.py",
}


def first_pair_faster(verdict) -> bool:
    pairs = verdict.timing.pairs if verdict.timing is not None else None
    if pairs:
        return pairs[0].speedup_ci[0] > 1.02
    return verdict.status == "faster"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="evaluations per candidate (interleaved)")
    parser.add_argument("--sandbox", type=Path, default=Path("sandbox"))
    args = parser.parse_args()
    problem = load_problem(SOFTMAX)
    rows = {name: {"first": 0, "final": 0, "confirmed": 0, "seconds": [], "speedups": []} for name in CANDIDATES}
    for run in range(args.runs):
        for name, path in CANDIDATES.items():
            options = EvalOptions(sandbox_root=args.sandbox, threads=1)
            started = time.perf_counter()
            verdict = evaluate(problem, path.read_text(), options)
            row = rows[name]
            row["seconds"].append(time.perf_counter() - started)
            row["speedups"].append(verdict.speedup or 0.0)
            row["first"] += first_pair_faster(verdict)
            row["final"] += verdict.status == "faster"
            row["confirmed"] += bool(verdict.timing is not None and verdict.timing.pairs)
            print(f"{run} {name}: {verdict.status} {verdict.speedup or 0:.3f}x", flush=True)
    table = Table(title=f"softmax64, {args.runs} runs each, confirmation below {CONFIRM_BELOW}x")
    for column in ("candidate", "faster: first pair only", "faster: confirmed", "second pair ran",
                   "speedup median [min, max]", "median s per verdict"):  # fmt: skip
        table.add_column(column)
    for name, row in rows.items():
        s = row["speedups"]
        table.add_row(
            name,
            f"{row['first']}/{args.runs}",
            f"{row['final']}/{args.runs}",
            f"{row['confirmed']}/{args.runs}",
            f"{statistics.median(s):.3f} [{min(s):.3f}, {max(s):.3f}]",
            f"{statistics.median(row['seconds']):.1f}",
        )
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
