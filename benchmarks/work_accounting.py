"""CPU time per phase of each sandbox, read from outside its processes, and the margins the rules keep.

Usage: python benchmarks/work_accounting.py [--fixtures GLOB ...] [--honest PROBLEM=CANDIDATE ...]

For every evaluation it prints the candidate's sandbox CPU per phase (start, load, check,
warm-up, timed, idle) next to the baseline's, and the two ratios the work rules judge:
- idle: CPU while frozen between requests (rejected above measure/session's limit);
- cores: CPU of the timed calls / (their wall time x the thread budget) (rejected above CORE_SLACK);
- threads: the candidate's peak thread count beyond the baseline's (rejected beyond budget + slack).
Honest candidates come first (they must sit well inside every limit), then the class A and B
fixtures of tests/adversarial (each must be caught by some rule, or buy nothing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from adversarial.common import all_fixtures, run_fixture  # noqa: E402

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate  # noqa: E402
from kernel_agent.problem.load import load_problem  # noqa: E402
from kernel_agent.sandbox.host.process import IDLE_CPU_LIMIT_NS  # noqa: E402
from kernel_agent.timing.rules import CORE_MIN_MS, CORE_SLACK, THREAD_SLACK  # noqa: E402

HONEST = [
    ("tests/fixtures/softmax64", "tests/fixtures/candidates/faster.py"),
    ("tests/fixtures/softmax64", "tests/fixtures/softmax64/kernel.py"),
    ("examples/cpp_softmax", "examples/cpp_softmax/candidates/faster.py"),
    ("examples/cpp_matmul", "examples/cpp_matmul/candidates/faster.py"),
    ("examples/torch_opchain", "examples/torch_opchain/candidates/faster.py"),
]
PHASES = ("start", "load", "check", "warmup", "timed")


def cells(verdict, threads: int) -> list[str]:  # noqa: ANN001 - a Verdict
    accounts = verdict.accounting or {}
    cand, base = accounts.get("candidate") or {}, accounts.get("baseline") or {}
    phases = cand.get("phases", {})
    row = [f"{phases.get(p, {}).get('cpu_ms', 0):.0f}" if p in phases else "-" for p in PHASES]
    row.append(f"{cand.get('idle_cpu_ms', 0):.1f}" if cand else "-")
    timed = phases.get("timed")
    row.append(f"{timed['cpu_ms'] / max(1e-9, timed['wall_ms'] * threads):.2f}" if timed else "-")
    row.append(f"{cand.get('max_threads', 0) - base.get('max_threads', 0):+d}" if cand and base else "-")
    base_timed = (base.get("phases") or {}).get("timed")
    row.append(f"{base_timed['cpu_ms'] / max(1e-9, base_timed['wall_ms'] * threads):.2f}" if base_timed else "-")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--fixtures", nargs="*", default=["a*", "b23*", "b61*", "b27*", "b31*", "c43*"], help="fixture name globs"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="also write the table here (text)")
    args = parser.parse_args()
    table = Table(title=f"Sandbox CPU per phase (ms), measured from outside, threads={args.threads}")
    for column in ("candidate", "verdict", *PHASES, "idle", "cores used/budget", "threads vs base", "baseline cores"):
        table.add_column(column, justify="left" if column in ("candidate", "verdict") else "right")
    for problem_path, candidate in HONEST:
        problem = load_problem(ROOT / problem_path)
        verdict = evaluate(
            problem, (ROOT / candidate).read_text(), EvalOptions(sandbox_root=ROOT / "sandbox", threads=args.threads)
        )
        table.add_row(
            f"honest: {problem.name}/{Path(candidate).name}",
            f"{verdict.status} {verdict.speedup or 0:.2f}x",
            *cells(verdict, args.threads),
        )
    fixtures = [f for f in all_fixtures() if not f.params and any(Path(f.name).match(g) for g in args.fixtures)]
    for fixture in fixtures:
        verdict = run_fixture(fixture, ROOT / "sandbox", threads=args.threads)
        table.add_row(f"{fixture.name}", f"{verdict.status}: {verdict.reason[:70]}", *cells(verdict, args.threads))
    console = Console(width=250, record=True)
    console.print(table)
    console.print(
        f"limits: idle CPU <= {IDLE_CPU_LIMIT_NS / 1e6:.0f} ms in all; "
        f"timed CPU <= wall x threads x {CORE_SLACK} + "
        + " or ".join(f"{ms:.0f} ms ({source})" for source, ms in CORE_MIN_MS.items())
        + "; "
        f"threads <= baseline's + budget + {THREAD_SLACK}. '-' = the evaluation ended before that phase."
    )
    if args.out:
        args.out.write_text(console.export_text())


if __name__ == "__main__":
    main()
