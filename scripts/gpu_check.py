"""The one prepared run for a lent GPU (issue 35; DESIGN.md section 18), called by `scripts/gpu-check`. It installs
nothing and imports no database or LLM package; every step is a subprocess with a time cap inside its section's
budget, so one that hangs or fails costs only itself. It runs to the end whatever fails, writes one markdown
table to $OUT (or benchmarks/results/), and ends with the list of what failed.

Sections, in order (each budget in seconds from GPU_CHECK_<SECTION>_BUDGET):
  controls     A/A x GPU_CHECK_AA (20), a 2x-slower control and 3% gains x GPU_CHECK_GAIN3 (3), per data path
               (host, device), with the speed classes and MDE against the 1% resolution target (issue 36)
  fixtures     every GPU adversarial fixture, per data path (tests/adversarial/run_gpu_fixtures.py)
  examples     each Triton example's candidates and baseline copy, per data path (eager and compile beside the first)
  tune         tune + selector report for the Triton matmul family, then the softmax family (scripts/gpu_tune.py)
  kernelbench  five KernelBench level-1 files at their published sizes, honest candidates, per data path
  profiles     device ceilings and the profile of two Triton examples (kernel-agent profile)
  regions      kernel-agent regions on the bundled DLRM (and the tiny Llama where transformers imports) at
               GPU_CHECK_REGIONS_SIZE (small), shares as kernel device time, then regions --check on its problems
--dry-run runs every section on this CPU with CPU counterparts (the Triton interpreter, a C++ family, CPU
problems) and exits 1 if a step broke for a reason of the script's own (a usage error, a traceback, no output).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = os.environ.get("PYTHON", sys.executable)
PATHS = ("host", "device")
BUDGETS = {
    "controls": 150,
    "fixtures": 110,
    "examples": 80,
    "tune": 60,
    "kernelbench": 40,
    "profiles": 30,
    "regions": 90,
}
MIN_STEP_S = 10  # a step is not started with less of its section's budget left than this


@dataclass
class Row:
    section: str
    what: str
    path: str
    status: str
    speedup: str = ""
    ci: str = ""
    note: str = ""
    seconds: float = 0.0


@dataclass
class Check:
    dry: bool
    out: Path
    rows: list[Row] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # every step that did not end as planned
    broken: list[str] = field(default_factory=list)  # a usage error, a traceback, no output: the script's fault
    section: str = ""
    deadline: float = 0.0

    def begin(self, section: str) -> None:
        self.section = section
        budget = float(os.environ.get(f"GPU_CHECK_{section.upper()}_BUDGET", BUDGETS[section] * (3 if self.dry else 1)))
        self.deadline = time.monotonic() + budget

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def step(self, what: str, path: str, argv: list[str], cap: float) -> tuple[str, float] | None:
        """Run one step; its stdout, or None (cut, skipped or failed: the row says which)."""
        if self.left() < MIN_STEP_S:
            self.rows.append(Row(self.section, what, path, "skipped", note="the section's budget was spent"))
            self.failed.append(f"{self.section}: {what} ({path}) skipped, budget spent")
            return None
        limit, began = min(cap, self.left()), time.monotonic()
        try:
            proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=limit, env=environment())
        except subprocess.TimeoutExpired as exc:
            self._log(what, path, (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else "")
            self.rows.append(Row(self.section, what, path, "cut", note=f"no result within {limit:.0f} s"))
            self.failed.append(f"{self.section}: {what} ({path}) cut at {limit:.0f} s")
            return None
        seconds = time.monotonic() - began
        self._log(what, path, proc.stderr)
        if proc.returncode == 2 or "Traceback" in proc.stderr or not proc.stdout.strip():
            said = (proc.stderr.strip().splitlines() or ["no output"])[-1][:160].replace("|", "/")
            self.rows.append(Row(self.section, what, path, "error", note=f"exit {proc.returncode}: {said}"))
            self.failed.append(f"{self.section}: {what} ({path}) exit {proc.returncode}: {said}")
            self.broken.append(f"{self.section}: {what} ({path})")
            return None
        return proc.stdout, seconds

    def _log(self, what: str, path: str, stderr: str) -> None:
        with (self.out / "gpu-check-stderr.log").open("a") as log:
            log.write(f"== {self.section} {what} {path}\n{stderr}\n")


def environment() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def fmt(value: object) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def verdict_row(check: Check, what: str, path: str, text: str, seconds: float) -> None:
    data = json.loads(text[text.index("{") :])
    with (check.out / "gpu-check-verdicts.jsonl").open("a") as out:
        out.write(json.dumps({"section": check.section, "what": what, "path": path, **data}) + "\n")
    ci = data.get("speedup_ci") or [None, None]
    vs = data.get("speedup_vs") or {}
    refs = ", ".join(f"vs {k} {fmt((v or {}).get('value'))}" for k, v in vs.items())
    note = (refs + "; " if refs else "") + str(data.get("reason", ""))[:120].replace("|", "/").replace("\n", " ")
    row = Row(check.section, what, path, data["status"], fmt(data.get("speedup")), f"[{fmt(ci[0])}, {fmt(ci[1])}]")
    row.note, row.seconds = note, seconds
    check.rows.append(row)


def evaluation(check: Check, problem: Path, candidate: Path, path: str, references: bool, cap: float) -> None:
    device = "cpu" if check.dry else "cuda"
    argv = [PY, "-m", "kernel_agent", "eval", str(problem), str(candidate), "--device", device, "--json"]
    argv += ["--references" if references else "--no-references", "--gpu-data", path, "--timeout", str(int(cap))]
    argv += ["--sandbox", str(check.out / "sandbox")]
    what = f"{problem.name} {candidate.name}"
    done = check.step(what, path, argv, cap)
    if done is not None:
        verdict_row(check, what, path, *done)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated sections to run (default: all)")
    args = parser.parse_args()
    from gpu_check_sections import SECTIONS, header, summary

    out = Path(os.environ.get("OUT") or (tempfile.mkdtemp() if args.dry_run else ROOT / "benchmarks" / "results"))
    out.mkdir(parents=True, exist_ok=True)
    for name in ("gpu-check-stderr.log", "gpu-check-verdicts.jsonl"):
        (out / name).write_text("")
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"
    check = Check(args.dry_run, out)
    wanted = [s for s in args.only.split(",") if s] or list(SECTIONS)
    for name in wanted:
        check.begin(name)
        try:
            SECTIONS[name](check)
        except Exception as exc:  # noqa: BLE001 - a section's own bug: said, and the next section runs
            check.failed.append(f"{name}: the section raised {type(exc).__name__}: {exc}")
            check.broken.append(name)
    report = out / f"gpu-check-{time.strftime('%Y-%m-%d', time.gmtime())}.md"
    report.write_text(header(check) + summary(check))
    print(report.read_text())
    if check.dry and check.broken:
        print(f"gpu-check --dry-run: {len(check.broken)} step(s) broke: {check.broken}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
