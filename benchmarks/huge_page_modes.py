"""Huge pages for the whole worker process against huge pages for its heap after `import torch`.

Usage: python benchmarks/huge_page_modes.py [--problems DIR ...] [--aa N] [--sandbox DIR]

The workers' heaps sit on huge pages so two processes running one kernel time alike. Until 2026-12-03
glibc was asked for them for the whole process (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`), so torch's
import scattered its heap over huge pages too; now the worker asks for them itself on the heap once torch
is imported (`worker.advise_huge_heap`). Each problem's baseline is evaluated against itself N times per
mode, the modes alternating verdict by verdict, through the real evaluation path: a `faster` A/A verdict is
a false accept. Prints, per problem and mode, the verdict and worker-start times, how far the A/A speedups
stray from 1, the false accepts and flags, and the huge pages each side held.
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
from kernel_agent.sandbox.host import isolation

PROBLEMS = ["examples/cpp_softmax", "examples/torch_opchain"]
MODES = ("whole process", "heap after import")
TUNABLE = {"GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}


@dataclass
class AA:
    problem: str
    mode: str
    status: str
    speedup: float | None
    seconds: float
    start_seconds: float
    huge_mb: tuple[float, float]


def one(folder: Path, mode: str, sandbox: Path) -> AA:
    isolation.PINNED_MALLOC.pop("GLIBC_TUNABLES", None)
    if mode == "whole process":
        isolation.PINNED_MALLOC.update(TUNABLE)  # read by sandbox_env at each worker's launch
    problem = load_problem(folder)
    started = time.perf_counter()
    verdict = evaluate(problem, problem.baseline_source, EvalOptions(sandbox_root=sandbox))
    seconds = time.perf_counter() - started
    sides = verdict.accounting or {}
    huge = tuple(sides.get(side, {}).get("huge_pages_kb", 0) / 1024 for side in ("candidate", "baseline"))
    start = verdict.durations.get("sandbox_start", 0.0) + verdict.durations.get("baseline_start", 0.0)
    return AA(folder.name, mode, verdict.status, verdict.speedup, seconds, start, huge)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="*", default=PROBLEMS)
    parser.add_argument("--aa", type=int, default=30, help="A/A verdicts per problem and mode")
    parser.add_argument("--sandbox", type=Path, default=Path("sandbox"))
    args = parser.parse_args()
    console = Console(width=200)
    runs: list[AA] = []
    for folder in map(Path, args.problems):
        for index in range(args.aa):
            for mode in MODES if index % 2 == 0 else MODES[::-1]:
                run = one(folder, mode, args.sandbox)
                runs.append(run)
                console.print(
                    f"{run.problem} {mode}: {run.status} {run.speedup} start {run.start_seconds:.2f} s "
                    f"verdict {run.seconds:.2f} s huge MB {run.huge_mb[0]:.0f}/{run.huge_mb[1]:.0f}",
                    highlight=False,
                )
    table = Table(title="A/A verdicts per problem and huge-page mode (medians unless said)")
    for column in ("problem", "mode", "verdicts", "verdict s", "worker start s", "median |A/A - 1|",
                   "max |A/A - 1|", "false accepts", "flagged", "other", "huge MB cand/base"):  # fmt: skip
        table.add_column(column)
    for folder in map(Path, args.problems):
        for mode in MODES:
            mine = [r for r in runs if r.problem == folder.name and r.mode == mode]
            stray = [abs(r.speedup - 1) * 100 for r in mine if r.speedup]
            table.add_row(
                folder.name,
                mode,
                str(len(mine)),
                f"{statistics.median(r.seconds for r in mine):.2f}",
                f"{statistics.median(r.start_seconds for r in mine):.2f}",
                f"{statistics.median(stray):.1f}%" if stray else "-",
                f"{max(stray):.1f}%" if stray else "-",
                str(sum(r.status == "faster" for r in mine)),
                str(sum(r.status == "flagged" for r in mine)),
                str(sum(r.status not in ("faster", "flagged", "correct") for r in mine)),
                "/".join(f"{statistics.median(r.huge_mb[side] for r in mine):.0f}" for side in (0, 1)),
            )
    console.print(table)


if __name__ == "__main__":
    main()
