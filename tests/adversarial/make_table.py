"""Run every CPU adversarial fixture through the real evaluation path and write
benchmarks/results/adversarial.md (fixture, THREATS row, expected, and what each isolation level observed).

    python tests/adversarial/make_table.py [--out benchmarks/results/adversarial.md] [--levels bwrap,unshare,process]
        [--sample]

Each level is forced (`isolation=`); a level that does not start here is a column of "-" with the reason below the
table. `--sample` runs the weaker levels on `WEAKER_LEVELS_SAMPLE` only (what CI runs), bwrap on every fixture.
"""

from __future__ import annotations

import argparse
import datetime
import json
import socket
import sqlite3
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from adversarial.common import ROOT, WEAKER_LEVELS_SAMPLE, Fixture, all_fixtures, load_fixture, run_fixture  # noqa: E402
from kernel_agent.sandbox.host.levels import attempt  # noqa: E402

# Rows that cannot be defended (or even exercised) on a CPU; they live in gpu_fixtures/.
GPU_ROWS = [
    ("g01_stale_allocator_memory", "1", "incorrect", "needs a CUDA caching allocator"),
    ("g02_unwritten_tail", "2", "incorrect", "needs CUDA allocator garbage"),
    ("g22_side_stream", "22", "rejected/flagged", "needs CUDA streams and events"),
    ("g23_non_default_stream", "22", "rejected/flagged/incorrect", "needs CUDA streams"),
    ("g32_l2_persistence", "32", "no inflated speedup", "needs a CUDA L2 persisting window"),
]

KNOWN_LIMITS = """
## Known limits (not defended on this CPU setup)

- Isolation level `process` (no bwrap, no unshare): a `setsid` fork-bomb escapee survives the
  process-group kill; only bwrap/unshare PID namespaces (in force here) reap it. A per-slot uid
  and `kill(-1)` as that uid would be the fix.
- Disk and tmpfs floods: `RLIMIT_FSIZE` caps each file, not the number of files in `out/`,
  `tmp/` or bwrap's private `/tmp` (tmpfs, RAM). No quota exists.
- The trusted-clock corroboration (`measure._timer_gap`) rejects when the trusted clock supports
  less than a quarter of a claimed gain, or when every timed block hides a third of its time
  (and more than a quarter of the baseline's per-call time); a forger that hides less than that
  (e.g. claims 1.2x where the truth is 1.0x) is only flagged (above 1.1x) or can pass on a
  loaded 2-core CPU. The in-process integrity checks still catch the timer patches we know.
- The other side of that trade: honest fast kernels are sometimes flagged for review. Harness
  overhead outside the timer differs between processes by 0.1-0.3 ms per call here, so an
  honest 0.2-0.4 ms torch.softmax against a 1-2 ms baseline was flagged in 7 of 16 evaluations
  with 4 rounds (what the fixtures use), and in 0 of 10 with the default 10 rounds
  ("claimed 3.37x, the clock supports 2.32x"); `benchmarks/timer_corroboration.py` measured
  3 of 8 and 0 of 8 on 2026-11-30. Flagged never means accepted silently.
- A candidate that patches the worker's serialisation path itself (full worker impersonation)
  can return forged inputs for the trusted mutation check; only output correctness and the
  trusted clock are beyond its reach.
"""


def params_for(name: str, tmp: Path) -> dict[str, str]:
    if name == "c37_write_outside":
        db = tmp / "runs.db"
        with sqlite3.connect(db) as conn:
            conn.execute("create table t (x)")
        (tmp / "notes.txt").write_text("x")
        return {"TARGETS": json.dumps([str(ROOT / "pyproject.toml"), str(tmp / "notes.txt"), str(db)])}
    if name == "c37_symlink_clobber":
        (tmp / "a").write_text("a")
        (tmp / "b").write_text("b")
        (tmp / "dir").mkdir()
        return {"TARGETS": json.dumps([str(tmp / "a"), str(tmp / "b"), str(tmp / "dir")])}
    return {}


def run_at(fixture, level: str):
    """One fixture at one forced level, with the targets and listener it needs."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        listener = None
        params = params_for(fixture.name, tmp_path)
        if fixture.name == "c38_network":
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            params = {"PORT": str(listener.getsockname()[1])}
        try:
            return run_fixture(load_fixture(fixture.path), tmp_path / "sandbox", params, isolation=level)
        finally:
            if listener is not None:
                listener.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "adversarial.md")
    parser.add_argument("--levels", default="bwrap,unshare,process")
    parser.add_argument("--sample", action="store_true", help="the weaker levels on CI's sample of fixtures only")
    args = parser.parse_args()
    levels = [level for level in args.levels.split(",") if level]
    started = {level: attempt(level) for level in levels}
    observed: dict[tuple[str, str], list[Observed]] = {}
    for fixture in all_fixtures():
        for level in levels:
            weaker = level != "bwrap"
            if not started[level].works or (args.sample and weaker and fixture.name not in WEAKER_LEVELS_SAMPLE):
                continue
            verdict = run_at(fixture, level)
            seen = Observed(verdict.status, verdict.reason)
            observed.setdefault((fixture.name, level), []).append(seen)
            mark = "ok " if seen.matches(fixture) else "BAD"
            print(f"{mark} {level:8s} {fixture.name:32s} {verdict.status:13s} {verdict.reason[:80]}", flush=True)
    source = "`tests/adversarial/make_table.py`" + (" --sample" if args.sample else "")
    return write(args.out, observed, levels, started, source)


@dataclass(frozen=True)
class Observed:
    status: str
    reason: str

    def matches(self, fixture: Fixture) -> bool:
        return self.status in fixture.expect.split("|") and any(r in self.reason for r in fixture.reason.split("|"))


def write(
    out: Path, observed: dict[tuple[str, str], list[Observed]], levels: list[str], started: dict, source: str
) -> int:
    """The table: one row per fixture, one observed column per level ("-": not run there), and whether every
    observation matched. Returns 1 when one did not."""
    lines = [
        "# Adversarial fixtures: expected vs observed verdicts",
        "",
        f"Generated by {source} on {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC} (CPU only; "
        "each fixture evaluated through `kernel_agent.evaluate.evaluate` in the real sandbox, at the level each "
        "column names).",
        "",
        "| fixture | THREATS row | expected | " + " | ".join(levels) + " | match | reason (start, first level) |",
        "|---|---|---|" + "---|" * len(levels) + "---|---|",
    ]
    mismatches = 0
    for fixture in all_fixtures():
        seen = {level: observed.get((fixture.name, level), []) for level in levels}
        if not any(seen.values()):
            continue
        cells = [
            " / ".join(o.status if o.matches(fixture) else f"**{o.status}**" for o in seen[level]) or "-"
            for level in levels
        ]
        ok = all(o.matches(fixture) for runs in seen.values() for o in runs)
        mismatches += not ok
        first = next(runs[0] for runs in seen.values() if runs)
        reason = first.reason.replace("|", "/").replace("\n", " ")[:110] or "-"
        expected = fixture.expect.replace("|", " or ")
        lines.append(
            f"| `{fixture.name}` | {fixture.row} | {expected} | "
            + " | ".join(cells)
            + f" | {'yes' if ok else '**NO**'} | {reason} |"
        )
    lines += [""] + [f"- `{lvl}` did not start here: {tried.why}" for lvl, tried in started.items() if not tried.works]
    lines += [
        "",
        "## GPU-only rows (not defended or exercised on CPU)",
        "",
        "| fixture | THREATS row | expected | observed | note |",
        "|---|---|---|---|---|",
    ]
    for name, row, expected, note in GPU_ROWS:
        lines.append(
            f"| `gpu_fixtures/{name}` | {row} | {expected} | not run (no GPU) | "
            f"{note}; run `tests/adversarial/run_gpu_fixtures.py` |"
        )
    lines.append(KNOWN_LIMITS)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out} ({mismatches} mismatch(es))")
    return 1 if mismatches else 0


def write_from_records(out: Path) -> int:
    """The table from a pytest run's records (`common.record`, with KERNEL_AGENT_ADVERSARIAL_TABLE set)."""
    records = Path(f"{out}.records")
    observed: dict[tuple[str, str], list[Observed]] = {}
    for line in records.read_text().splitlines() if records.exists() else []:
        item = json.loads(line)
        observed.setdefault((item["fixture"], item["level"]), []).append(Observed(item["status"], item["reason"]))
    levels = ["bwrap", "unshare", "process"]
    return write(
        out, observed, levels, {level: attempt(level) for level in levels}, "a pytest run of tests/adversarial"
    )


if __name__ == "__main__":
    sys.exit(main())
