"""`kernel-agent regions` on the two bundled recipes: the regions found, each one's share of the forward pass
with its interval, the selected set's coverage and bound, and the time the command took.

Why: the ranking is only as good as its shares; this records what the command printed on a stated machine and
load, so a later run (a quieter machine, a GPU) can be compared. It runs the real command a user would and writes
one markdown file per run into benchmarks/results/ (the command's regions.md per recipe, with a header).

    .venv/bin/python benchmarks/regions_tables.py --size small --rounds 20

KERNEL_AGENT_CONTENTION_LIMIT=1 makes the command report shares on a loaded machine instead of refusing them;
the header then states the load, and the numbers are what that load made them.
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
RECIPES = {"tiny_llama": "examples/models/tiny_llama.py:build", "dlrm": "examples/models/dlrm.py:build"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    day = datetime.date.today().isoformat()
    lines = [f"# kernel-agent regions on the bundled recipes, size {args.size} ({day}, CPU)", ""]
    lines.append(
        f"{os.cpu_count()} cores; load average before: {os.getloadavg()[0]:.1f}; "
        f"KERNEL_AGENT_CONTENTION_LIMIT={os.environ.get('KERNEL_AGENT_CONTENTION_LIMIT', 'unset (0.25)')}; "
        f"`--rounds {args.rounds}`. Shares are medians over rounds of a replay of the captured ops, with 95% "
        "bootstrap intervals; a refusal says the machine was too busy."
    )
    for name, recipe in RECIPES.items():
        with tempfile.TemporaryDirectory() as tmp:
            start = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "kernel_agent", "regions", recipe, "--size", args.size, "--out", tmp,
                 "--rounds", str(args.rounds), "--json"],
                cwd=ROOT, capture_output=True, text=True,
            )  # fmt: skip
            took = time.monotonic() - start
            if proc.returncode not in (0, 1) or not proc.stdout.strip():
                sys.exit(f"{name}: regions failed: {proc.stderr[-2000:]}")
            data = json.loads(proc.stdout)
            found = len(data["regions"])
            emitted = sum(r["emitted"] for r in data["regions"])
            lines += ["", f"## {name} ({recipe})", ""]
            lines.append(
                f"{found} regions found, {emitted} emitted; the command took {took:.0f} s "
                f"(load average after: {os.getloadavg()[0]:.1f})."
            )
            lines += ["", *(Path(tmp) / "regions.md").read_text().splitlines()[1:]]
    out = ROOT / "benchmarks" / "results" / f"{day}-regions-{args.size}-cpu.md"
    out.write_text("\n".join(lines) + "\n")
    print(out)


if __name__ == "__main__":
    main()
