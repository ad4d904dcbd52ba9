"""Controls with known answers for issue 36: how often each speed class comes out, per control, with intervals.

Usage: KERNEL_AGENT_CONTENTION_LIMIT=1 python benchmarks/resolution.py [--problems cpp_softmax,torch_opchain]
       [--aa 20] [--gain3 10] [--gain5 5] [--gain10 5] [--slow 5] [--out FILE] [--threads 1] [--processes N]

Each control is a copy of a bundled CPU problem whose baseline is made slower (or the candidate), by a known
amount of extra work of the problem's own kind:

- gainN: the baseline runs the bundled kernel and then the same kernel on N% of the rows (its result dropped),
  the candidate the bundled kernel alone: a true gain of about N% (the in-process calibration column says how
  much, timed directly in this process, many calls, alternating);
- A/A: baseline and candidate are the bundled kernel;
- 2x slower: the candidate runs the bundled kernel twice.

Cases are interleaved (one verdict of each control in turn), each verdict in this process through
`evaluate`. Prints a markdown table (Wilson 95% intervals on the counts) and writes it to --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

WRAP = """


EXTRA = {extra!r}  # share of the rows run again: the control's known extra work


def kernel(*args):
    out = _bundled_kernel(*args)
    rows = max(1, round(EXTRA * args[0].shape[0]))
    _bundled_kernel(*[a[:rows] if a.dim() == args[0].dim() and a.shape[0] == args[0].shape[0] else a for a in args])
    return out
"""


def make_control(problem: str | Path, workdir: Path, extra: float) -> Path:
    """A copy of examples/PROBLEM (or of the problem folder PROBLEM) whose baseline (kernel.py) does `extra` more
    rows of work."""
    source = Path(problem) if Path(problem).is_dir() else ROOT / "examples" / str(problem)
    target = workdir / f"{source.name}_extra{round(extra * 100)}"
    if target.exists():
        return target
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("candidates", "__pycache__"))
    if extra:  # the bundled kernel inlined (the baseline's sandbox sees its one file), renamed, then wrapped
        bundled = (source / "kernel.py").read_text()
        wrapped = bundled.replace("def kernel(", "def _bundled_kernel(", 1) + WRAP.format(extra=extra)
        (target / "kernel.py").write_text(wrapped)
    return target


def candidate_source(problem: str, twice: bool) -> str:
    """The bundled kernel (inlined, so the candidate's sandbox needs nothing beside it), run once or twice."""
    bundled = (ROOT / "examples" / problem / "kernel.py").read_text()
    if not twice:
        return bundled
    twice_wrapper = "\n\ndef kernel(*args):\n    _once(*args)\n    return _once(*args)\n"
    return bundled.replace("def kernel(", "def _once(", 1) + twice_wrapper


def calibrate(problem_dir: Path, candidate: str, calls: int = 40) -> float:
    """The control's true speedup, timed directly here: baseline time / candidate time over alternating calls."""
    import torch

    from kernel_agent.problem.load import load_problem

    problem = load_problem(problem_dir)
    base_ns: dict = {}
    exec(problem.baseline_path.read_text(), base_ns)
    cand_ns: dict = {}
    exec(candidate, cand_ns)
    ratios = []
    torch.set_num_threads(1)
    for shape in problem.shapes:
        args = problem.module.make_inputs(shape, torch.float32, "cpu", torch.Generator().manual_seed(0))
        times = {"b": [], "c": []}
        for _ in range(calls):
            for key, fn in (("b", base_ns["kernel"]), ("c", cand_ns["kernel"])):
                t = time.perf_counter()
                fn(*args)
                times[key].append(time.perf_counter() - t)
        ratios.append(statistics.median(times["b"]) / statistics.median(times["c"]))
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios))


def share_text(rows: list[dict]) -> str:
    shares = [r["others_share"] for r in rows if r.get("others_share") is not None]
    return f"{statistics.median(shares):.0%}" if shares else "-"


def wilson(k: int, n: int) -> str:
    if n == 0:
        return "-"
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"{k}/{n} [{max(0, centre - half):.2f}, {min(1, centre + half):.2f}]"


def table(header: str, rows: dict[tuple[str, str], list[dict]], calibration: dict) -> list[str]:
    """The markdown table: per control, the classes with Wilson 95% intervals and the timing's own numbers."""
    lines = [
        header,
        "",
        "| control | problem | in-process ratio | verdicts | FAST | SAME | AMBIGUOUS | SLOW | other "
        "| speedup median [min, max] | median MDE | median +-half-width | ended by "
        "| median s per verdict (timing s) | load 1-min median | others' share of the timing core, median |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (label, problem), got in rows.items():
        n = len(got)
        classes = Counter(r["class"] for r in got)
        other = n - sum(classes[k] for k in ("FAST", "SAME", "AMBIGUOUS", "SLOW"))
        speeds = [r["speedup"] for r in got if r["speedup"]]
        mdes = [r["mde"] for r in got if r["mde"] is not None]
        halves = [math.sqrt(r["ci"][1] / r["ci"][0]) - 1 for r in got if r["ci"] and r["ci"][0] > 0]
        ended = Counter(r["ended_by"] for r in got)
        timing = [r["timing_s"] for r in got if r["timing_s"] is not None]
        speed_text = f"{statistics.median(speeds):.3f} [{min(speeds):.3f}, {max(speeds):.3f}]" if speeds else "-"
        ratio = calibration.get((label, problem))
        lines.append(
            f"| {label} | {problem} | {f'{ratio:.3f}' if ratio else '-'} | {n} | {wilson(classes['FAST'], n)} | "
            f"{wilson(classes['SAME'], n)} | {wilson(classes['AMBIGUOUS'], n)} | {wilson(classes['SLOW'], n)} | "
            f"{other} | {speed_text} | {statistics.median(mdes) if mdes else float('nan'):.3f} | "
            f"{statistics.median(halves) if halves else float('nan'):.3f} | "
            f"{', '.join(f'{k} {v}' for k, v in ended.items())} | "
            f"{statistics.median(r['wall'] for r in got):.1f} ({statistics.median(timing) if timing else 0:.1f}) | "
            f"{statistics.median(r['load'] for r in got):.2f} | {share_text(got)} |"
        )
    return lines


def from_log(path: str) -> dict[tuple[str, str], list[dict]]:
    """The rows of a run's log (one `CONTROL PROBLEM {json}` line per verdict): a run stopped early still counts."""
    rows: dict[tuple[str, str], list[dict]] = {}
    for line in Path(path).read_text().splitlines():
        head, brace, rest = line.partition(" {")
        if not brace or " " not in head:
            continue
        label, problem = head.rsplit(" ", 1)
        rows.setdefault((label, problem), []).append(json.loads("{" + rest))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", default="cpp_softmax,torch_opchain")
    ap.add_argument("--aa", type=int, default=20)
    ap.add_argument("--gain3", type=int, default=10)
    ap.add_argument("--gain5", type=int, default=5)
    ap.add_argument("--gain10", type=int, default=5)
    ap.add_argument("--slow", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--timing-budget", type=float, default=None, help="seconds (default: EvalConfig's)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--table-from", default=None, help="print the table of an earlier run's log and stop")
    args = ap.parse_args()
    if args.table_from:
        print("\n".join(table(f"From {args.table_from}", from_log(args.table_from), {})))
        return

    from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
    from kernel_agent.problem.load import load_problem

    work = Path(tempfile.mkdtemp(prefix="resolution-"))
    controls = []  # (label, problem name, problem dir, candidate source, expected, count)
    for problem in args.problems.split(","):
        plain = make_control(problem, work, 0.0)
        for label, extra, twice, count, expected in (
            ("A/A", 0.0, False, args.aa, 1.0),
            ("3% gain", 0.03, False, args.gain3, 1.03),
            ("5% gain", 0.05, False, args.gain5, 1.05),
            ("10% gain", 0.10, False, args.gain10, 1.10),
            ("2x slower", 0.0, True, args.slow, 0.5),
        ):
            if count:
                folder = make_control(problem, work, extra) if extra else plain
                source = candidate_source(problem, twice)
                controls.append((label, problem, folder, source, expected, count))
    calibration = {(c[0], c[1]): calibrate(c[2], c[3]) for c in controls}
    print("calibration", json.dumps({f"{k[0]} | {k[1]}": v for k, v in calibration.items()}), flush=True)
    rows: dict[tuple[str, str], list[dict]] = {(c[0], c[1]): [] for c in controls}
    load_before = os.getloadavg()
    began = time.time()
    most = max(c[5] for c in controls)
    for index in range(most):
        for label, problem, folder, source, _, count in controls:
            if index >= count:
                continue
            budget = {"timing_budget": args.timing_budget} if args.timing_budget else {}
            options = EvalOptions(
                sandbox_root=work / "sandbox", threads=args.threads, processes=args.processes, **budget
            )
            t = time.perf_counter()
            verdict = evaluate(load_problem(folder), source, options)
            wall = time.perf_counter() - t
            timing = verdict.timing.to_json() if verdict.timing is not None else {}  # the stored record
            res = timing.get("resolution") or {}
            row = {
                "status": str(verdict.status),
                "class": res.get("class"),
                "speedup": verdict.speedup,
                "ci": verdict.speedup_ci,
                "mde": res.get("mde"),
                "ended_by": res.get("ended_by"),
                "process_effect": timing.get("process_effect"),
                "processes": timing.get("processes"),  # each pair's speedup, huge pages, start seconds
                "cpu_per_wall": timing.get("cpu_per_wall"),
                "others_share": (timing.get("contention") or {}).get("other"),  # of the timing cores' time
                "wall": wall,
                "timing_s": verdict.durations.get("timing"),
                "load": os.getloadavg()[0],
                "reason": verdict.reason[:160],
            }
            rows[(label, problem)].append(row)
            print(label, problem, json.dumps(row), flush=True)
    load_after = os.getloadavg()
    header = (
        f"Controls, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(began))}, {os.cpu_count()} cores, threads "
        f"{args.threads}, processes {args.processes}, timing budget {args.timing_budget or 'default'} s; "
        f"load average (1, 5, 15 min) before "
        f"{tuple(round(x, 2) for x in load_before)}, after {tuple(round(x, 2) for x in load_after)}; "
        f"{(time.time() - began) / 60:.1f} min"
    )
    lines = table(header, rows, calibration)
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
        Path(args.out).with_suffix(".json").write_text(json.dumps({f"{k[0]} | {k[1]}": v for k, v in rows.items()}))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
