"""Shared helpers for the adversarial suite: fixture metadata, rendering, real evaluations.

Each fixture under `fixtures/` is a real candidate file whose docstring names the THREATS.md
row, the expected verdict status and a distinctive substring of the reason:

    ROW: 27
    EXPECT: rejected
    REASON: harness tampering: time.perf_counter
    OPTIONS: rounds=4 timeout=6 data_bytes=... file_bytes=... disk_bytes=...   (optional)
    PARAMS: TARGETS PORT                                         (optional placeholders)
    PROBLEM: softmax_cuda                                        (optional: a folder under problems/,
                                                                  else a path from the repository root,
                                                                  e.g. examples/cpp_softmax)
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from kernel_agent.core.verdict import Verdict
from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import load_problem
from kernel_agent.sandbox.host.isolation import Limits

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIXTURES = HERE / "fixtures"
PROBLEMS = HERE / "problems"
SOFTMAX = ROOT / "tests" / "fixtures" / "softmax64"
SANDBOX_UID = 65534
# Run at the unshare and process levels too, in CI (the whole catalogue runs at the strongest level that starts): one
# or two fixtures per way out of the sandbox (secrets, files, replay, the channel, network, processes, signals, the
# kernel's own calls, the segments, sandbox detection) and the honest controls.
WEAKER_LEVELS_SAMPLE = (
    "a12_reference_by_path",
    "b31_impersonate_worker",
    "b61_iouring_sqpoll",
    "c15_read_environ",
    "c16_file_replay",
    "c31_fifo_reply",
    "c37_shadow_module",
    "c43_fork_bomb_setsid",
    "c48_kill_parent",
    "d51_cache_dirs",
    "b34_stop_the_baseline",
    "h13_write_input_segment",
    "w3d_sandbox_aware",
    "ok_baseline_itself",
    "ok_faster",
)


@dataclass
class Fixture:
    path: Path
    row: str
    expect: str
    reason: str
    problem: Path
    options: dict[str, float] = field(default_factory=dict)
    params: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.stem

    def render(self, **params: str) -> str:
        """The candidate source with its placeholders filled in."""
        source = self.path.read_text()
        for key in self.params:
            source = source.replace(f"__{key}__", params.get(key, DEFAULT_PARAMS.get(key, "")))
        return source

    def eval_options(self, sandbox_root: Path, **overrides: object) -> EvalOptions:
        opts = dict(self.options)
        limits = Limits(
            data_bytes=int(opts.pop("data_bytes", Limits().data_bytes or 0)) or None,
            file_bytes=int(opts.pop("file_bytes", Limits().file_bytes)),
            disk_bytes=int(opts.pop("disk_bytes", Limits().disk_bytes)),
        )
        # One thread: on a small shared CI machine, two OpenMP threads that spin at barriers while
        # the other is descheduled make single blocks 100x slower and the timing meaningless.
        kwargs: dict[str, object] = {
            "sandbox_root": sandbox_root,
            "limits": limits,
            "timeout": 60.0,
            "timing_rounds": 4,
            "threads": 1,
        }
        if "rounds" in opts:
            kwargs["timing_rounds"] = int(opts.pop("rounds"))  # the header says rounds: timing rounds
        if "timeout" in opts:
            kwargs["timeout"] = float(opts.pop("timeout"))
        kwargs.update(overrides)
        return EvalOptions(**kwargs)  # type: ignore[arg-type]


DEFAULT_PARAMS = {
    "TARGETS": json.dumps([str(ROOT / "pyproject.toml"), "/tmp/ka-adversarial-target", str(ROOT / "runs.db")]),
    "PORT": "9",
}


def _field(doc: str, name: str) -> str | None:
    match = re.search(rf"^{name}:[ \t]*(.*)$", doc, re.MULTILINE)
    return match.group(1).strip() if match else None


def load_fixture(path: Path) -> Fixture:
    text = path.read_text()
    doc = text.split('"""')[1] if text.startswith('"""') else ""
    expect, reason, row = _field(doc, "EXPECT"), _field(doc, "REASON"), _field(doc, "ROW")
    if expect is None or reason is None or row is None:
        raise ValueError(f"{path.name}: fixture docstring needs ROW, EXPECT and REASON")
    options = {}
    for item in (_field(doc, "OPTIONS") or "").split():
        key, value = item.split("=")
        options[key] = float(value)
    return Fixture(
        path, row, expect, reason, _problem(_field(doc, "PROBLEM")), options, (_field(doc, "PARAMS") or "").split()
    )


def _problem(name: str | None) -> Path:
    """A PROBLEM: line names a folder under problems/, else a path from the repository root."""
    if not name:
        return SOFTMAX
    return PROBLEMS / name if (PROBLEMS / name).is_dir() else ROOT / name


def all_fixtures() -> list[Fixture]:
    return [load_fixture(p) for p in sorted(FIXTURES.glob("*.py"))]


def run_fixture(
    fixture: Fixture, sandbox_root: Path, params: dict[str, str] | None = None, **overrides: object
) -> Verdict:
    """Evaluate the fixture through the real evaluation path (sandbox, workers, timing)."""
    problem = load_problem(fixture.problem)
    verdict = evaluate(problem, fixture.render(**(params or {})), fixture.eval_options(sandbox_root, **overrides))
    record(fixture, verdict)
    return verdict


TABLE_VARIABLE = "KERNEL_AGENT_ADVERSARIAL_TABLE"  # set: every verdict here is kept, and the table written at the end


def record(fixture: Fixture, verdict: Verdict) -> None:
    """One observed verdict, appended to the table's record file (`make_table.write_from_records` reads it), so a
    whole pytest run of the suite writes benchmarks/results/adversarial.md without evaluating anything twice."""
    table = os.environ.get(TABLE_VARIABLE)
    if not table:
        return
    line = {"fixture": fixture.name, "level": verdict.isolation.split(" ")[0], "status": verdict.status}
    with open(f"{table}.records", "a") as out:
        out.write(json.dumps({**line, "reason": verdict.reason}) + "\n")


def sandbox_processes(sandbox_root: Path | None = None) -> list[tuple[int, str]]:
    """Stale processes of ours: descendants of this process, or sandbox-uid processes whose
    command line or working directory is under `sandbox_root` (other test runs on the same
    machine use the same uid, so the uid alone would not say whose they are)."""
    me = os.getpid()
    root = str(sandbox_root.resolve()) if sandbox_root else None
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            status = (entry / "status").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            cwd = ""
        if "State:\tZ" in status:
            continue
        uid_match = re.search(r"^Uid:\s+(\d+)", status, re.MULTILINE)
        ours = (
            root is not None
            and uid_match is not None
            and int(uid_match.group(1)) == SANDBOX_UID
            and (root in cmdline or cwd.startswith(root))
        )
        if ours or _descends_from(int(entry.name), me):
            found.append((int(entry.name), cmdline[:120]))
    return found


def _descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(64):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == ancestor:
            return True
        if ppid <= 1:
            return False
        pid = ppid
    return False
