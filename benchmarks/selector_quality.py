"""Selection efficiency of every selector on the held-out shapes of the CPU tuning families (issue 15).

Usage: python benchmarks/selector_quality.py [--db PATH] [--threads 1] [FAMILY ...]
For each family (default: examples/tuning/cpp_tiled_matmul and cpp_row_softmax) it runs `kernel-agent tune`
over the training and held-out shapes (resumable: rows already stored are not timed again), then scores
every selector from the stored rows alone and prints the table with the metrics' definitions. Goal of the
issue: the best selector at a geometric-mean efficiency >= 0.95 and P10 >= 0.85 while timing <= 10% of
the pool.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from kernel_agent.db.session import open_database
from kernel_agent.db.tuning import VariantKey
from kernel_agent.db.writes import problem_hash, sha256
from kernel_agent.measure.ceilings import fingerprint_key
from kernel_agent.optimize.config import SearchConfig
from kernel_agent.problem.load import load_problem
from kernel_agent.select import abstain, report, stored
from kernel_agent.select.base import Selector
from kernel_agent.select.nearest import NearestShape
from kernel_agent.select.prior import decision, search_order
from kernel_agent.select.registry import selectors, skipped
from kernel_agent.select.replay import replay
from kernel_agent.select.score import SelectorScore, score

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["examples/tuning/cpp_tiled_matmul", "examples/tuning/cpp_row_softmax"]
TIE = 0.01  # the report's tie tolerance (top-1)
SWEEP = (3, 4)  # trusted nearest with its top k on every shape


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", default=FAMILIES)
    parser.add_argument("--db", default="selector-quality.db")
    parser.add_argument("--threads", type=int, default=1, help="1 on a shared machine: OpenMP barriers stall otherwise")
    parser.add_argument("--quick-rounds", type=int, default=2)
    parser.add_argument("--full-rounds", type=int, default=5)
    parser.add_argument("--top", type=int, default=2)
    parser.add_argument("--abstain-k", type=int, default=abstain.K)
    parser.add_argument("--abstain-below", type=float, default=abstain.BELOW)
    parser.add_argument("--no-tune", action="store_true", help="score what is stored; time nothing")
    parser.add_argument("--rounds", type=int, default=SearchConfig.proposal_rounds, help="replayed searches' rounds")
    parser.add_argument("--patience", type=int, default=SearchConfig.patience, help="replayed searches' patience")
    args = parser.parse_args()
    for family in args.families:
        seconds = 0.0 if args.no_tune else tune(family, args)
        print_family(family, args, seconds)
    for line in skipped():
        print(f"skipped: {line}")
    print("\nDefinitions:\n" + report.definitions())


def tune(family: str, args: argparse.Namespace) -> float:
    started = time.perf_counter()
    command = [sys.executable, "-m", "kernel_agent", "tune", family, "--shapes", "all", "--db", args.db]
    command += ["--threads", str(args.threads), "--quick-rounds", str(args.quick_rounds)]
    command += ["--full-rounds", str(args.full_rounds), "--top", str(args.top)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env={**os.environ})
    if done.returncode != 0:
        sys.exit(f"tune {family} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - started


def print_family(family: str, args: argparse.Namespace, seconds: float) -> list[SelectorScore]:
    problem = load_problem(ROOT / family)
    variant = problem.baseline_source
    key = VariantKey(
        problem.name, problem_hash(problem), sha256(variant), fingerprint_key("cpu", args.threads), "float32"
    )
    found = stored.load(open_database(args.db), problem, variant, key, args.threads)
    table = found.table
    scores = [
        score(s, table, found.sets.train, found.sets.heldout, found.context)
        for s in selectors(args.abstain_k, args.abstain_below)
    ]
    failed = sum(len(f) for f in table.failed.values())
    timed = sum(len(t) for t in table.times.values())
    print(f"\n## {problem.name}\n")
    print(f"pool: {len(table.pool)} configs ({', '.join(f'{k} {v}' for k, v in problem.tunables.items())})")
    print(f"train shapes ({len(found.sets.train)}): {[list(s) for s in found.sets.train]}")
    print(f"held-out shapes ({len(found.sets.heldout)}): {[list(s) for s in found.sets.heldout]}")
    print(f"stored (shape, config) cells: {timed} timed, {failed} failed; {found.ceilings_note}")
    if seconds:
        print(f"tune wall time this run: {seconds:.0f} s")
    print()
    print(report.markdown(scores))
    best = max(scores[1:], key=lambda s: (s.timed_fraction <= 0.10, s.geomean))
    print_search(problem, found, args)
    print(
        f"\nbest within 10% of the pool timed: {best.name}: efficiency {best.geomean:.3f}, P10 {best.p10:.3f}, "
        f"timed {best.timed_fraction:.1%} (goal: >= 0.95, >= 0.85, <= 10%)"
    )
    return scores


def print_search(problem, found, args: argparse.Namespace) -> None:  # noqa: ANN001
    """The search provider with and without nearest-shape's advice, per held-out shape, replayed on stored rows."""
    selector = NearestShape()
    selector.fit(found.table.subset(found.sets.train), found.context)
    rows = []
    for shape in found.sets.heldout:
        if not found.table.times.get(shape):
            continue
        plain = replay(problem, found.table, [shape], [])
        advised = replay(problem, found.table, [shape], search_order(selector, [shape]))
        rows.append((shape, plain, advised))
    print("\nSearch replayed on the stored rows (one held-out shape per search; candidates until its best):\n")
    print("| shape | best speedup over default | plain: candidates | with nearest-shape's order: candidates |")
    print("|---|---|---|---|")
    for shape, plain, advised in rows:
        print(f"| {list(shape)} | {plain.best_speedup:.3f} | {plain.candidates} | {advised.candidates} |")
    both = [(p.candidates, a.candidates) for _, p, a in rows if p.candidates and a.candidates]
    if both:
        total_plain, total_advised = sum(p for p, _ in both), sum(a for _, a in both)
        print(
            f"\ntotal candidates to the best: plain {total_plain}, advised {total_advised} "
            f"({total_plain / max(1, total_advised):.2f}x fewer); same best reached on "
            f"{sum(1 for _, p, a in rows if abs(p.reached - a.reached) < 1e-9)}/{len(rows)} shapes"
        )
    print_stopped(problem, found, args)


def print_stopped(problem, found, args: argparse.Namespace) -> None:  # noqa: ANN001
    """The same searches stopped as `optimize` stops them, and the trusted selectors (time the decision, stop):
    what a user pays (candidates timed) and gets (the best reached), per held-out shape."""
    shapes = [s for s in found.sets.heldout if found.table.times.get(s)]
    stop = {"rounds": args.rounds, "patience": args.patience}
    arms: dict[str, list] = {"plain": [replay(problem, found.table, [s], [], **stop) for s in shapes]}
    for base in selectors(analytical=True):
        if not isinstance(base, Selector) or base.name == "default":
            continue
        base.fit(found.table.subset(found.sets.train), found.context)
        if base.name == "nearest":
            arms["nearest order"] = [replay(problem, found.table, [s], search_order(base, [s]), **stop) for s in shapes]
        arms[f"{base.name} trusted"] = [
            replay(problem, found.table, [s], decision(base, [s]), only_first=True, **stop) for s in shapes
        ]
        if base.name == "nearest":  # the price of more certainty: its top k on every shape, however sure
            for k in SWEEP:
                arms[f"nearest top {k}"] = [
                    replay(problem, found.table, [s], decision(base, [s], k, 1.01), only_first=True, **stop)
                    for s in shapes
                ]
    print(
        f"\nThe same searches stopped as `optimize` stops them (--rounds {args.rounds} --patience {args.patience}, "
        f"4 a round), and trusting a selector (`--trust-selector`: its pick, or its top {abstain.K} where its "
        f"confidence is under {abstain.BELOW}, then stop). Cells: candidates timed / best speedup reached:\n"
    )
    names = list(arms)
    print("| shape | best | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for i, shape in enumerate(shapes):
        cells = " | ".join(f"{arms[n][i].timed} / {arms[n][i].reached:.3f}" for n in names)
        print(f"| {list(shape)} | {arms['plain'][i].best_speedup:.3f} | {cells} |")
    plain_timed = sum(c.timed for c in arms["plain"])
    print()
    for name in names:
        counts = arms[name]
        timed = sum(c.timed for c in counts)
        same = sum(1 for c, p in zip(counts, arms["plain"]) if c.reached >= p.reached * (1 - TIE))
        efficiency = math.exp(statistics.fmean(math.log(c.reached / c.best_speedup) for c in counts))
        print(
            f"- {name}: {timed} timed ({plain_timed / max(1, timed):.2f}x fewer than plain); at least the plain "
            f"search's best (within {TIE:.0%}) on {same}/{len(counts)} shapes; reached / pool's best, geomean "
            f"{efficiency:.3f}, worst {min(c.reached / c.best_speedup for c in counts):.3f}"
        )


if __name__ == "__main__":
    main()
