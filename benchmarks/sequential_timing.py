"""Sequential stopping against fixed rounds: time per verdict, rounds used, and the A/A false-accept rate.

Usage: python benchmarks/sequential_timing.py [--problems DIR ...] [--repeats N] [--aa N] [--aa-problem DIR]

Part 1, over the bundled CPU problems: each problem's `candidates/faster.py`, its baseline against
itself, and a 2x-slower control (the baseline's kernel called twice per call) are evaluated with
`--fixed-rounds` and with sequential stopping, the two modes alternating so load falls on both alike.
Part 2: the baseline against itself N times in each mode (alternating): an A/A verdict `faster` is a
false accept. Every verdict goes through the real evaluation path (sandbox, checks, A/B timing).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import load_problem

PROBLEMS = ["examples/cpp_softmax", "examples/cpp_matmul", "examples/torch_opchain", "examples/torch_attention"]
MODES = ("fixed", "sequential")
TWICE = (
    "\n\n# ---- benchmark control: the same kernel, run twice per call (a true 0.5x) ----\n"
    "_bench_once = kernel\n\n\n"
    "def kernel(*inputs):\n"
    "    _bench_once(*inputs)\n"
    "    return _bench_once(*inputs)\n"
)


@dataclass
class Run:
    problem: str
    candidate: str
    mode: str
    status: str
    speedup: float | None
    ci: tuple[float, float] | None
    rounds: int | None
    seconds: float
    timing_seconds: float


def candidates(folder: Path) -> dict[str, str]:
    problem = load_problem(folder)
    base = problem.baseline_source
    found = {"itself": base, "2x slower": base.rstrip("\n") + TWICE}
    faster = folder / "candidates" / "faster.py"
    if faster.exists():
        found["faster.py"] = faster.read_text()
    return found


def one(folder: Path, name: str, source: str, mode: str, sandbox: Path) -> Run:
    problem = load_problem(folder)
    started = time.perf_counter()
    verdict = evaluate(problem, source, EvalOptions(sequential=mode == "sequential", sandbox_root=sandbox))
    seconds = time.perf_counter() - started
    return Run(
        folder.name,
        name,
        mode,
        verdict.status,
        verdict.speedup,
        tuple(verdict.speedup_ci) if verdict.speedup_ci else None,
        verdict.timing.rounds if verdict.timing is not None else None,
        seconds,
        verdict.durations.get("timing", 0.0),
    )


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" if values else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="*", default=PROBLEMS)
    parser.add_argument("--repeats", type=int, default=1, help="alternating pairs per (problem, candidate)")
    parser.add_argument("--aa", type=int, default=100, help="A/A verdicts per mode")
    parser.add_argument("--aa-problem", default="examples/cpp_softmax")
    parser.add_argument("--sandbox", type=Path, default=Path("sandbox"))
    args = parser.parse_args()
    console = Console(width=200)  # the tables are read from a file or a wide terminal
    runs: list[Run] = []
    for folder in map(Path, args.problems):
        for name, source in candidates(folder).items():
            for repeat in range(args.repeats):
                order = MODES if repeat % 2 == 0 else MODES[::-1]
                for mode in order:
                    runs.append(one(folder, name, source, mode, args.sandbox))
                    console.print(
                        f"{folder.name} {name} {mode}: {runs[-1].status} {runs[-1].speedup} "
                        f"rounds {runs[-1].rounds} {runs[-1].seconds:.1f} s",
                        highlight=False,
                    )
    table = Table(title="Part 1: one verdict per (problem, candidate, mode); seconds are wall time per verdict")
    for column in ("problem", "candidate", "mode", "status", "speedup [interval]", "rounds", "timing s", "verdict s"):
        table.add_column(column)
    for run in runs:
        interval = f"{run.speedup:.3f} [{run.ci[0]:.3f}, {run.ci[1]:.3f}]" if run.speedup and run.ci else "-"
        table.add_row(run.problem, run.candidate, run.mode, run.status, interval, str(run.rounds),
                      f"{run.timing_seconds:.2f}", f"{run.seconds:.2f}")  # fmt: skip
    console.print(table)
    aa_folder = Path(args.aa_problem)
    aa_source = load_problem(aa_folder).baseline_source
    aa: list[Run] = []
    for index in range(args.aa):
        for mode in MODES if index % 2 == 0 else MODES[::-1]:
            aa.append(one(aa_folder, "itself", aa_source, mode, args.sandbox))
            if aa[-1].status == "faster":  # a false accept: say which, with its numbers
                console.print(f"A/A false accept ({mode}): {aa[-1].speedup:.3f}x {aa[-1].ci}, rounds {aa[-1].rounds}")
        if (index + 1) % 10 == 0:
            console.print(f"A/A {index + 1}/{args.aa}", highlight=False)
    summary = Table(title="Summary by mode (medians over verdicts)")
    for column in ("mode", "verdicts", "verdict s", "timing s", "rounds", "2x-slower control speedups",
                   f"A/A false accepts ({aa_folder.name})", "A/A verdict s", "A/A rounds"):  # fmt: skip
        summary.add_column(column)
    for mode in MODES:
        mine = [r for r in runs if r.mode == mode]
        slow = [r.speedup for r in mine if r.candidate == "2x slower" and r.speedup]
        mine_aa = [r for r in aa if r.mode == mode]
        false = sum(r.status == "faster" for r in mine_aa)
        summary.add_row(
            mode,
            str(len(mine)),
            _median([r.seconds for r in mine]),
            _median([r.timing_seconds for r in mine]),
            _median([r.rounds for r in mine if r.rounds]),
            ", ".join(f"{s:.3f}" for s in slow) or "-",
            f"{false}/{len(mine_aa)}" if mine_aa else "-",
            _median([r.seconds for r in mine_aa]),
            _median([r.rounds for r in mine_aa if r.rounds]),
        )
    console.print(summary)
    fixed = [r.seconds for r in runs + aa if r.mode == "fixed"]
    sequential = [r.seconds for r in runs + aa if r.mode == "sequential"]
    if fixed and sequential:
        seq_s, fixed_s = statistics.median(sequential), statistics.median(fixed)
        console.print(
            f"median time per verdict, all verdicts: sequential {seq_s:.2f} s, "
            f"fixed {fixed_s:.2f} s, ratio {seq_s / fixed_s:.3f}",
            highlight=False,
        )


if __name__ == "__main__":
    main()
