"""Micro against model: the bundled CPU winners' certified speedups beside the speedup they buy inside a model.

Why: a kernel's micro-benchmark win is the start of the story; the end-to-end number in the model it was written
for is the one a user gets, and the Amdahl bound (each op's share of the model's time) says how much it could
ever be. This runs the real commands a user would: `optimize --seeds` on the bundled CPU problems the recipe
`examples/models/cpu_transformer.py` has layers for (the hand-written candidates evaluated first, the offline
search after them), `export` as a pip package (certificates included), then `e2e` of that package in the recipe
at the chosen size, and writes one markdown table per run into benchmarks/results/.

    .venv/bin/python benchmarks/e2e_micro_vs_model.py --size base --rounds 10
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ["cpp_softmax", "cpp_gelu_layernorm", "cpp_cross_entropy", "torch_attention", "torch_opchain"]
RECIPE = f"{ROOT / 'examples' / 'models' / 'cpu_transformer.py'}:build"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "kernel_agent", *args], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"kernel-agent {args[0]} failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}")
    return proc


def x(value: float | None, ci: list[float] | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def table(data: dict, args: argparse.Namespace, minutes: float, skipped: list[str]) -> str:
    labels = list(data["ops"][0]["share"]) if data["ops"] else []
    lines = [
        f"# Micro against model on the CPU ({datetime.date.today()})",
        "",
        f"`python benchmarks/e2e_micro_vs_model.py --size {args.size} --rounds {args.rounds}` ({minutes:.0f} min "
        f"in all): `optimize --seeds --provider search --rounds {args.search_rounds} --threads {args.threads}` on "
        f"{', '.join(PROBLEMS)}; `export --format pip`; `e2e` of the package in `{data['recipe'].split('/')[-1]}` "
        f"(size {args.size}) on {data['device']}, {data['threads']} thread(s), swapped by {data['swapped_by']}. "
        "Micro speedups are the certificates' (each winner's A/B verdict against its problem's baseline, and "
        "against torch eager, which the unswapped model runs); the model's are the forward pass A/B-timed with and "
        "without the package, same statistics (medians per round, round-bootstrap 95% interval). Share: the op's "
        "layers' time in the unswapped forward pass. Amdahl bound: the model speedup those shares allow at the "
        "micro speedups vs eager.",
        "",
        "| op | layers | micro vs baseline | micro vs eager | " + " | ".join(f"share {s}" for s in labels) + " |",
        "|---|---|---|---|" + "---|" * len(labels),
    ]
    for op in data["ops"]:
        shares = " | ".join(f"{100 * op['share'][s]:.1f}%" for s in labels)
        lines.append(
            f"| {op['kernel']} | {op['layers']} | {x(op['micro'], op['micro_ci'])} | "
            f"{x(op['vs_eager'], op['vs_eager_ci'])} | {shares} |"
        )
    lines += ["", "| model forward | unswapped (median ms) | swapped (median ms) | speedup | Amdahl bound |"]
    lines += ["|---|---|---|---|---|"]
    for row in data["per_shape"]:
        lines.append(
            f"| {row['shape']} | {row['plain_ms']:.3f} | {row['swapped_ms']:.3f} | {x(row['speedup'], row['ci'])} | "
            f"{x(data['amdahl'].get(row['shape']))} |"
        )
    lines.append(
        f"| geometric mean ({data['rounds']} rounds) | | | {x(data['speedup'], data['ci'])} | |"
        if data["speedup"] is not None
        else f"| not timed: {data['reason']} | | | | |"
    )
    lines += [
        "",
        f"Outputs of the swapped model against the unswapped: largest |difference| {data['max_abs_error']:.3g} "
        f"(rtol {data['tolerance'][0]:g}, atol {data['tolerance'][1]:g}). Other processes took "
        f"{100 * data['contention'].get('other', 0):.0f}% of the cores' time during the model's timing "
        f"(KERNEL_AGENT_CONTENTION_LIMIT={os.environ.get('KERNEL_AGENT_CONTENTION_LIMIT', 'unset')}).",
    ]
    for kernel, why in {**data["unused"], **dict(s.split(": ", 1) for s in skipped)}.items():
        lines.append(f"- {kernel}: {why}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="base", choices=["small", "base"])
    parser.add_argument("--rounds", type=int, default=10, help="A/B rounds of the model's forward pass")
    parser.add_argument("--search-rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/DATE-e2e-...-cpu.md")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="e2e-bench-") as folder:
        work = Path(folder)
        db, sandbox = str(work / "runs.db"), str(work / "sandbox")
        proc = cli(
            "optimize", *(str(ROOT / "examples" / p) for p in PROBLEMS), "--seeds", "--provider", "search",
            "--rounds", str(args.search_rounds), "--samples", "1", "--threads", str(args.threads),
            "--db", db, "--sandbox", sandbox, "--json",
        )  # fmt: skip
        run = json.loads(proc.stdout)
        print(f"run {run['run_id']}: " + ", ".join(f"{k['name']} {k['status']}" for k in run["kernels"]))
        out = work / "package"
        proc = cli(
            "export", str(run["run_id"]), "--out", str(out), "--name", "bundled_cpu", "--format", "pip",
            "--db", db, "--sandbox", sandbox, "--threads", str(args.threads),
        )  # fmt: skip
        shipped = {
            c["kernel"] for c in json.loads((out / "bundled_cpu" / "certificate.json").read_text())["certificates"]
        }
        skipped = [
            f"{k['name']}: not exported (the run's status for it: {k['status']})"
            for k in run["kernels"]
            if k["name"] not in shipped
        ]
        proc = cli(
            "e2e", str(out), "--model", RECIPE, "--size", args.size, "--rounds", str(args.rounds), "--json",
            "--db", db,
        )  # fmt: skip
        data = json.loads(proc.stdout)
    text = table(data, args, (time.monotonic() - started) / 60, skipped)
    target = args.out or ROOT / "benchmarks" / "results" / f"{datetime.date.today()}-e2e-micro-vs-model-cpu.md"
    target.write_text(text)
    print(text)
    print(f"written to {target}")


if __name__ == "__main__":
    main()
