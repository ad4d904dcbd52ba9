"""Time per verdict of an older checkout against this one, in alternation, in one run.

Usage: python benchmarks/eval_time_pair.py OLD_CHECKOUT [PAIRS] [--mix] [--path DIRS]
(e.g. `git worktree add /tmp/today 5dcc3dc`). One A/A evaluation of examples/cpp_softmax per call,
each in a fresh interpreter (so per-process costs such as imports count, as they do for `eval`);
the older code gets its own build store. With --mix, each pair is instead the eight cases MIX (the
CPU problems both checkouts bundle, each A/A and with its bundled faster candidate), the two codes
alternating case by case. With --path, the evaluations see that PATH instead of /usr/bin:/bin (a folder of
links without bwrap measures the `unshare` level). Prints a markdown table and the ratio of the medians.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import json, sys, time
from pathlib import Path
root, store, name, candidate = sys.argv[1:5]
try:
    from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
    from kernel_agent.problem.load import load_problem
except ImportError:  # the flat layout before the stage folders
    from kernel_agent.evaluate import EvalOptions, evaluate
    from kernel_agent.problem import load_problem
problem = load_problem(Path(root) / "examples" / name)
source = Path(problem.baseline_path if candidate == "-" else Path(root) / "examples" / name / candidate).read_text()
began = time.perf_counter()
kw = {"build_store": Path(store)} if store != "-" else {}
v = evaluate(problem, source, EvalOptions(sandbox_root=Path("/tmp/eval_time_pair_sandbox"), **kw))
wall = time.perf_counter() - began
print(json.dumps({"wall": wall, "status": v.status, "speedup": v.speedup, "durations": v.durations}))
"""
MIX = [
    (problem, candidate)
    for problem in ("cpp_softmax", "cpp_matmul", "torch_attention", "torch_opchain")
    for candidate in ("-", "candidates/faster.py")
]


def main() -> None:
    here = str(Path(__file__).resolve().parent.parent)
    old = str(Path(sys.argv[1]).resolve())
    argv = sys.argv[2:]
    path = "/usr/bin:/bin"
    if "--path" in argv:
        at = argv.index("--path")
        path = argv[at + 1]
        del argv[at : at + 2]
    args = [a for a in argv if a != "--mix"]
    pairs = int(args[0]) if args else 3
    cases = MIX if "--mix" in sys.argv else [("cpp_softmax", "-")]
    roots = {f"old ({old})": (old, "/tmp/eval_time_pair_store"), "this checkout": (here, "-")}
    results: dict[str, list[dict]] = {name: [] for name in roots}
    for case in [c for _ in range(pairs) for c in cases]:
        for name, (root, store) in roots.items():
            env = {"PYTHONPATH": root, "PATH": path}
            proc = subprocess.run(
                [sys.executable, "-c", SCRIPT, root, store, *case], capture_output=True, text=True, cwd=root, env=env
            )
            try:
                row = json.loads(proc.stdout.strip().splitlines()[-1])
            except (IndexError, json.JSONDecodeError):
                print(name, "FAILED", proc.stderr[-800:])
                continue
            results[name].append(row)
            phases = {k: round(v, 2) for k, v in row["durations"].items()}
            print(name, case[0], case[1], f"{row['wall']:.2f} s", row["status"], row["speedup"], phases, flush=True)
    print()
    print("| code | verdicts | median s per verdict | min | max | median timing s | A/A speedups |")
    print("|---|---|---|---|---|---|---|")
    for name, rows in results.items():
        walls = [r["wall"] for r in rows]
        timing = statistics.median(r["durations"].get("timing", 0) for r in rows)
        speedups = " ".join(f"{r['speedup']:.3f}" for r in rows if r["speedup"]) if len(cases) == 1 else "(mixed)"
        print(
            f"| {name} | {len(rows)} | {statistics.median(walls):.2f} | {min(walls):.2f} | {max(walls):.2f} "
            f"| {timing:.2f} | {speedups} |"
        )
    old_median, new_median = (statistics.median(r["wall"] for r in rows) for rows in results.values())
    print(f"\nthis / old, median time per verdict: {new_median / old_median:.3f}")


if __name__ == "__main__":
    main()
