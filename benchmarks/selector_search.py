"""The search provider with and without a selector, as `optimize` runs it, side by side (issue 15).

Usage: python benchmarks/selector_search.py [FAMILY ...] [--db PATH] [--threads 1] [--rounds 8]
For each family (default: both CPU tuning families): `kernel-agent tune FAMILY --shapes train` (resumable:
stored rows are not timed again), then three `optimize` runs on the same database with the same options, in
an order that rotates per repeat: `--selector none` (the plain hill climb), `--selector nearest` (the configs
the nearest tuned shape's ranking puts first, then the climb) and `--selector nearest --trust-selector` (the
selector's decision only, then stop). Every candidate is verified and timed for real. Prints, per run: the
candidates timed, the best speedup over the baseline with its interval, and the candidates it took to reach
its own best; per family, each arm's median candidates timed against the plain climb's.
Training shapes are tuned, and a family's benchmark shapes may be among them (cpp_tiled_matmul's both are,
cpp_row_softmax's (16, 16384) is): then the selector reads their own rows, as it would for a user who tuned them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["examples/tuning/cpp_tiled_matmul", "examples/tuning/cpp_row_softmax"]
ARMS = {"none": ("--selector", "none"), "nearest": ("--selector", "nearest"),
        "nearest trusted": ("--selector", "nearest", "--trust-selector")}  # fmt: skip


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernel_agent", *args], capture_output=True, text=True, cwd=ROOT)


def tune(family: str, args: argparse.Namespace) -> float:
    started = time.perf_counter()
    done = cli("tune", family, "--shapes", "train", "--db", args.db, "--threads", str(args.threads),
               "--sandbox", args.sandbox)  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"tune {family} failed: {done.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - started


def optimize(family: str, arm: str, args: argparse.Namespace) -> dict:
    started = time.perf_counter()
    done = cli(
        "optimize", family, *ARMS[arm], "--rounds", str(args.rounds), "--samples", "4",
        "--patience", str(args.patience), "--threads", str(args.threads), "--db", args.db, "--sandbox", args.sandbox,
        "--no-references", "--no-retime-best", "--json",
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"optimize {family} {' '.join(ARMS[arm])} failed: {done.stderr.strip()[-800:]}")
    run = json.loads(done.stdout)
    listed = cli("candidates", "list", "--run", str(run["run_id"]), "--db", args.db, "--json")
    rows = json.loads(listed.stdout)
    rows = rows["candidates"] if isinstance(rows, dict) else rows
    timed = [r for r in rows if r.get("origin") not in ("baseline", "retime")]
    timed.sort(key=lambda r: r["id"])
    kernel = run["kernels"][0]
    return {
        "arm": arm,
        "run": run["run_id"],
        "candidates": len(timed),
        "speedups": [r.get("speedup") if r.get("status") == "faster" else None for r in timed],
        "ordered": [(r.get("speedup"), r.get("status") == "faster") for r in timed],
        "best": kernel.get("speedup"),
        "ci": kernel.get("speedup_ci"),
        "wall": time.perf_counter() - started,
        "notes": [line for line in done.stderr.splitlines() if "search order" in line or "selector" in line],
    }


def until(speedups: list[float | None], target: float) -> int | None:
    """Candidates timed until the first `faster` one at or above `target` (None: never)."""
    for index, value in enumerate(speedups, start=1):
        if value is not None and value >= target:
            return index
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", default=FAMILIES)
    parser.add_argument("--db", default="selector-search.db")
    parser.add_argument("--sandbox", default="sandbox")
    parser.add_argument("--threads", type=int, default=1, help="1 on a shared machine: OpenMP barriers stall otherwise")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--patience", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    for family in args.families:
        seconds = tune(family, args)
        print(f"\n## {family}\n\ntune --shapes train: {seconds:.0f} s (0 when every row was stored)\n")
        print("| repeat | arm | run | timed | best [interval] | to its own best | wall s |")
        print("|---|---|---|---|---|---|---|")
        arms = list(ARMS)
        timed: dict[str, list[int]] = {a: [] for a in arms}
        orders: list[str] = []
        for repeat in range(args.repeats):
            order = arms[repeat % len(arms) :] + arms[: repeat % len(arms)]
            runs = {a: optimize(family, a, args) for a in order}
            for arm in arms:
                r = runs[arm]
                timed[arm].append(r["candidates"])
                ci = f" [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]" if r["ci"] else ""
                best = f"{r['best']:.2f}x{ci}" if r["best"] else "- (none accepted)"
                own = until(r["speedups"], r["best"]) if r["best"] else None
                print(f"| {repeat + 1} | {arm} | {r['run']} | {r['candidates']} | {best} | {own or '-'} "
                      f"| {r['wall']:.0f} |")  # fmt: skip
                orders.append(f"{repeat + 1} {arm}: " + ", ".join(shown(v) for v in r["ordered"]))
            for line in runs["nearest"]["notes"]:
                print(f"\n{line}")
        print("\nThe order in which each run timed its candidates (speedup over the baseline; c: correct, not faster):")
        for line in orders:
            print(f"- {line}")
        plain = statistics.median(timed["none"])
        print()
        for arm in arms[1:]:
            median = statistics.median(timed[arm])
            print(
                f"median candidates timed: plain {plain}, {arm} {median} ({plain / max(median, 1):.2f}x fewer; goal 3x)"
            )


def shown(value: tuple[float | None, bool]) -> str:
    speedup, faster = value
    return "-" if speedup is None else (f"**{speedup:.2f}**" if faster else f"{speedup:.2f}c")


if __name__ == "__main__":
    main()
