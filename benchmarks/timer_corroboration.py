"""Honest false-flag rate of the timing rules, beside the rate forged timers are caught.

Usage: python benchmarks/timer_corroboration.py [--repeats N] [--conditions idle loaded]

Honest verdicts: the row-softmax fixture rewritten at five sizes (baseline from about 0.1 ms to
tens of ms a call), each timed against an honest fast rewrite (torch.softmax) and against
itself (A/A), N times each, on a quiet machine and with one core kept busy by another process.
An honest verdict that comes out `rejected` or `flagged` is a false flag.
Forged timers: the adversarial fixtures whose worker lies about its own clock (a forged reply
path, self-restoring and patched timers, an impersonated worker); each is caught when rejected.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from adversarial.common import all_fixtures, run_fixture  # noqa: E402

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate  # noqa: E402
from kernel_agent.problem.load import load_problem  # noqa: E402

SIZES = [(64, 256), (128, 1024), (256, 2048), (512, 4096), (1024, 8192)]
FORGERS = (
    "b27_patch_perf_counter",
    "b27_self_restoring_timer",
    "b28_forged_nonpositive_times",
    "b31_forge_reply_fd4",
    "b31_impersonate_worker",
)
HONEST = {
    "faster": ROOT / "tests" / "fixtures" / "candidates" / "faster.py",
    "A/A": ROOT / "tests" / "fixtures" / "softmax64" / "kernel.py",
}


def sized_problem(folder: Path, shape: tuple[int, int]) -> Path:
    """softmax64 with one benchmark shape."""
    target = folder / f"softmax_{shape[0]}x{shape[1]}"
    shutil.copytree(ROOT / "tests" / "fixtures" / "softmax64", target)
    source = (target / "problem.py").read_text().replace("SHAPES = [(256, 2048)]", f"SHAPES = [{shape}]")
    (target / "problem.py").write_text(source)
    return target


class Load:
    """One core kept busy by another process (unpinned), for the loaded condition."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __enter__(self) -> Load:
        self.process = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if self.on else None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--conditions", nargs="+", default=["idle", "loaded"])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    console = Console(width=200)
    honest = Table(
        title=f"Honest verdicts (threads={args.threads}, 10 rounds): a `rejected` or `flagged` one is a false flag"
    )
    for column in ("condition", "size", "candidate", "verdicts", "speedups", "baseline ms", "s/verdict"):
        honest.add_column(column)
    totals: Counter[str] = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        problems = {shape: load_problem(sized_problem(Path(tmp), shape)) for shape in SIZES}
        for condition in args.conditions:
            with Load(condition == "loaded"):
                for shape, problem in problems.items():
                    for name, path in HONEST.items():
                        statuses: Counter[str] = Counter()
                        speedups, base_ms, seconds = [], [], []
                        for _ in range(args.repeats):
                            began = time.perf_counter()
                            verdict = evaluate(
                                problem,
                                path.read_text(),
                                EvalOptions(sandbox_root=ROOT / "sandbox", threads=args.threads),
                            )
                            seconds.append(time.perf_counter() - began)
                            statuses[verdict.status] += 1
                            totals["honest"] += 1
                            totals["false"] += verdict.status in ("rejected", "flagged")
                            totals[f"false-{condition}"] += verdict.status in ("rejected", "flagged")
                            totals[f"n-{condition}"] += 1
                            if verdict.speedup:
                                speedups.append(f"{verdict.speedup:.2f}")
                                base_ms.append(verdict.timing.baseline.median_ms if verdict.timing else 0.0)
                            if verdict.status in ("rejected", "flagged"):
                                console.print(
                                    f"[red]false flag[/red] {condition} {shape} {name}: {verdict.reason}",
                                    markup=True,
                                    highlight=False,
                                )
                        honest.add_row(
                            condition,
                            f"{shape[0]}x{shape[1]}",
                            name,
                            ", ".join(f"{s} {n}" for s, n in statuses.most_common()),
                            " ".join(speedups),
                            f"{sorted(base_ms)[len(base_ms) // 2]:.3f}" if base_ms else "-",
                            f"{sorted(seconds)[len(seconds) // 2]:.1f}",
                        )
        forged = Table(title="Forged timers (the adversarial fixtures that lie about their own clock)")
        for column in ("condition", "fixture", "verdicts", "caught"):
            forged.add_column(column)
        fixtures = {f.name: f for f in all_fixtures()}
        for condition in args.conditions:
            with Load(condition == "loaded"):
                for name in FORGERS:
                    statuses = Counter()
                    for _ in range(args.repeats):
                        verdict = run_fixture(fixtures[name], ROOT / "sandbox", timing_rounds=10)
                        statuses[verdict.status] += 1
                        totals["forged"] += 1
                        totals["caught"] += verdict.status == "rejected"
                    forged.add_row(
                        condition,
                        name,
                        ", ".join(f"{s} {n}" for s, n in statuses.most_common()),
                        f"{statuses['rejected']}/{args.repeats}",
                    )
    console.print(honest)
    console.print(forged)
    rates = ", ".join(f"{c} {totals[f'false-{c}']}/{totals[f'n-{c}']}" for c in args.conditions)
    console.print(
        f"honest false flags: {totals['false']}/{totals['honest']} ({rates}); forged timers "
        f"caught: {totals['caught']}/{totals['forged']}",
        highlight=False,
    )


if __name__ == "__main__":
    main()
