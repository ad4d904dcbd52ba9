"""The search provider with and without a selector's order, as `optimize` runs it, side by side (issue 15).

Usage: python benchmarks/selector_search.py [FAMILY ...] [--db PATH] [--threads 1] [--rounds 8]
For each family (default: examples/tuning/cpp_tiled_matmul): `kernel-agent tune FAMILY --shapes train`
(resumable: stored rows are not timed again), then two `optimize` runs on the same database, one with
`--selector none` (the plain hill climb) and one with `--selector nearest` (the configs the nearest tuned
shape's ranking puts first), with the same options, alternating which goes first per repeat. Every candidate
is verified and timed for real. Prints, per run: candidates timed, the best speedup over the baseline with its
interval, the candidates it took to reach its own best, and those it took to come within --within of the
better best of the pair (a search that never does is counted at all it timed).
The selector never sees the benchmark shapes' own rows: only the training shapes are tuned.
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
FAMILIES = ["examples/tuning/cpp_tiled_matmul"]
SELECTORS = ("none", "nearest")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kernel_agent", *args], capture_output=True, text=True, cwd=ROOT)


def tune(family: str, args: argparse.Namespace) -> float:
    started = time.perf_counter()
    done = cli("tune", family, "--shapes", "train", "--db", args.db, "--threads", str(args.threads),
               "--sandbox", args.sandbox)  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"tune {family} failed: {done.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - started


def optimize(family: str, selector: str, args: argparse.Namespace) -> dict:
    started = time.perf_counter()
    done = cli(
        "optimize", family, "--selector", selector, "--rounds", str(args.rounds), "--samples", "4",
        "--patience", str(args.patience), "--threads", str(args.threads), "--db", args.db, "--sandbox", args.sandbox,
        "--no-references", "--no-retime-best", "--json",
    )  # fmt: skip
    if done.returncode != 0:
        sys.exit(f"optimize {family} --selector {selector} failed: {done.stderr.strip()[-800:]}")
    run = json.loads(done.stdout)
    listed = cli("candidates", "list", "--run", str(run["run_id"]), "--db", args.db, "--json")
    rows = json.loads(listed.stdout)
    rows = rows["candidates"] if isinstance(rows, dict) else rows
    timed = [r for r in rows if r.get("origin") not in ("baseline", "retime")]
    timed.sort(key=lambda r: r["id"])
    kernel = run["kernels"][0]
    return {
        "selector": selector,
        "run": run["run_id"],
        "candidates": len(timed),
        "speedups": [r.get("speedup") if r.get("status") == "faster" else None for r in timed],
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
    parser.add_argument("--within", type=float, default=0.05, help="'reached the best': within this of the better")
    args = parser.parse_args()
    for family in args.families:
        seconds = tune(family, args)
        print(f"\n## {family}\n\ntune --shapes train: {seconds:.0f} s (0 when every row was stored)\n")
        print("| repeat | selector | run | timed | best [interval] | to its own best | to the pair's best | wall s |")
        print("|---|---|---|---|---|---|---|---|")
        counts: dict[str, list[int]] = {s: [] for s in SELECTORS}
        for repeat in range(args.repeats):
            order = SELECTORS if repeat % 2 == 0 else tuple(reversed(SELECTORS))
            runs = {s: optimize(family, s, args) for s in order}
            better = max((r["best"] or 1.0) for r in runs.values())
            for selector in SELECTORS:
                r = runs[selector]
                reached = until(r["speedups"], better * (1 - args.within))
                counts[selector].append(reached if reached is not None else r["candidates"])
                ci = f" [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]" if r["ci"] else ""
                best = f"{r['best']:.2f}x{ci}" if r["best"] else "-"
                shown = reached if reached is not None else f"not within {args.within:.0%} ({r['candidates']} timed)"
                own = until(r["speedups"], r["best"]) if r["best"] else None
                print(f"| {repeat + 1} | {selector} | {r['run']} | {r['candidates']} | {best} | {own or '-'} | {shown} "
                      f"| {r['wall']:.0f} |")  # fmt: skip
            for line in runs["nearest"]["notes"]:
                print(f"\n{line}")
        plain, advised = (statistics.median(counts[s]) for s in SELECTORS)
        print(f"\nmedian candidates to the best: plain {plain}, with the selector {advised} "
              f"({plain / max(advised, 1):.2f}x fewer; goal: 3x)")  # fmt: skip


if __name__ == "__main__":
    main()
