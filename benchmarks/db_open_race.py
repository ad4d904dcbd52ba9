"""Many processes open one new SQLite database at the same instant: how many get "database is locked".

Usage: python benchmarks/db_open_race.py [--trials 20] [--processes 6] [--label NAME]
Each trial starts the processes, lets each import kernel-agent, then releases them at one wall-clock
instant to call `open_database` on a new file in a fresh folder. A trial fails when any process's
open raises. Appends a row to benchmarks/results/<date>-db-open-race-cpu.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPENER = """
import sys, time
from kernel_agent.db.session import DatabaseError, open_database
url, go = sys.argv[1], float(sys.argv[2])
while time.time() < go:
    pass
try:
    open_database(url).close()
    print("ok")
except DatabaseError as exc:
    print("error:", exc)
"""


def trial(processes: int, lead_s: float) -> list[str]:
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{folder}/runs.db"
        go = time.time() + lead_s
        children = [
            subprocess.Popen([sys.executable, "-c", OPENER, url, str(go)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
            for _ in range(processes)
        ]
        return [child.communicate(timeout=120)[0].strip() for child in children]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--lead", type=float, default=4.0, help="seconds each process has to import before the start")
    parser.add_argument("--label", default="this checkout")
    args = parser.parse_args()
    failed, reasons = 0, set()
    for index in range(args.trials):
        outputs = trial(args.processes, args.lead)
        errors = [line for line in outputs if not line.startswith("ok")]
        failed += bool(errors)
        reasons.update(line.split(": ", 2)[-1][:90] for line in errors)
        print(f"trial {index + 1}/{args.trials}: {len(errors)} of {args.processes} opens failed", flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    out = ROOT / "benchmarks" / "results" / f"{date.today()}-db-open-race-cpu.md"
    if not out.exists():
        out.write_text(
            "# Processes opening one new SQLite database at once\n\n"
            "`python benchmarks/db_open_race.py`: each trial releases the processes at one instant on a new file.\n\n"
            "| code | commit | trials | processes | trials with a failed open | reasons |\n|---|---|---|---|---|---|\n"
        )
    row = (
        f"| {args.label} | {commit.strip()} | {args.trials} | {args.processes} | {failed} | "
        f"{'; '.join(sorted(reasons)) or '-'} |\n"
    )
    with out.open("a") as handle:
        handle.write(row)
    print(row, end="")


if __name__ == "__main__":
    main()
