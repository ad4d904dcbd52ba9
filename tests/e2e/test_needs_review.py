"""A flagged best is a result (issue 11, ordinary defect 2): `optimize` used to end such a kernel
`no_gain` with every result column empty while the candidate waited for review.

Real parts: the CLI as a subprocess, the scripted OpenAI-compatible server over HTTP, sandboxed
evaluations, a real SQLite file. The flag is made honestly and deterministically: `--sanity-speedup`
below what the known-faster rewrite (torch.softmax, about 3.9x on this fixture) measures.
"""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
from pathlib import Path

import pytest
from conftest import CANDIDATES, SOFTMAX, run_cli
from scripted_server import ScriptedServer

pytestmark = pytest.mark.slow

# Float32 chunks instead of the baseline's float64 ones: honest, about 1.8x here (under a 2.8x bound).
MIDDLE = """import torch

CHUNK = 64


def kernel(x):
    out = torch.empty_like(x)
    for start in range(0, x.shape[0], CHUNK):
        block = x[start : start + CHUNK]
        e = torch.exp(block - block.amax(dim=-1, keepdim=True))
        out[start : start + CHUNK] = e / e.sum(dim=-1, keepdim=True)
    return out
"""


def fenced(source: str) -> str:
    return f"Here is a faster kernel.\n```python\n{source}```\n"


def optimize(db: Path, sandbox: Path, replies: list[str], sanity: float, *extra: str):
    with ScriptedServer([replies]) as server:
        proc = run_cli(
            "optimize",
            str(SOFTMAX),
            *server.provider_args(),
            "--rounds",
            "1",
            "--samples",
            str(len(replies)),
            "--threads",
            "1",
            "--sanity-speedup",
            str(sanity),
            "--db",
            str(db),
            "--sandbox",
            str(sandbox),
            *extra,
            env={"OPENAI_API_KEY": "sk-test-not-a-real-key"},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def verdicts(db: Path, run_id: int) -> list[tuple[int, str, float | None, float | None, float | None, str]]:
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "select c.id, e.status, e.speedup, e.ci_low, e.ci_high, e.reason from candidates c join "
            "evaluations e on e.candidate_id = c.id where c.origin != 'baseline' and c.run_id = ? order by c.id",
            (run_id,),
        ).fetchall()


def approve_argv(command: str) -> list[str]:
    """`kernel-agent review approve ID --db PATH` as printed, run through this interpreter."""
    words = shlex.split(command)
    assert words[:3] == ["kernel-agent", "review", "approve"], command
    return words[1:]


@pytest.fixture(scope="module")
def flagged(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One run whose only candidate beats the baseline but is flagged (speedup over the sanity bound)."""
    tmp = tmp_path_factory.mktemp("needs_review")
    db, sandbox = tmp / "runs.db", tmp / "sandbox"
    proc = optimize(db, sandbox, [fenced((CANDIDATES / "faster.py").read_text())], 1.5, "--json")
    result = json.loads(proc.stdout)
    return {"tmp": tmp, "db": db, "sandbox": sandbox, "run_id": result["run_id"], "kernel": result["kernels"][0]}


def test_optimize_json_reports_the_flagged_best_as_needs_review(flagged: dict) -> None:
    kernel, db = flagged["kernel"], flagged["db"]
    ((candidate_id, status, speedup, low, high, reason),) = verdicts(db, flagged["run_id"])
    assert status == "flagged" and "exceeds the sanity bound 1.5x" in reason, reason
    assert kernel["status"] == "needs_review", kernel
    assert kernel["best_candidate"] == candidate_id and kernel["speedup"] == pytest.approx(speedup)
    assert kernel["best_ms"] < kernel["baseline_ms"] and kernel["baseline_ms"] / kernel["best_ms"] == pytest.approx(
        speedup, rel=1e-6
    )
    review = kernel["review"]
    assert review["candidate"] == candidate_id and review["speedup_ci"] == [pytest.approx(low), pytest.approx(high)]
    assert review["reason"] == reason and review["decision"] is None
    assert review["command"] == f"kernel-agent review approve {candidate_id} --db {db}"
    assert (
        f"candidate {candidate_id} at {speedup:.2f}x [{low:.2f}, {high:.2f}] awaits review ({reason})"
        in kernel["reason"]
    )
    assert review["command"] in kernel["reason"] and "no candidate was verifiably faster" not in kernel["reason"]


def test_runs_show_and_its_json_carry_the_flagged_best(flagged: dict) -> None:
    db, kernel = str(flagged["db"]), flagged["kernel"]
    review = kernel["review"]
    shown = run_cli("runs", "show", str(flagged["run_id"]), "--db", db, env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if line.strip("│┃ ").startswith("softmax64"))
    assert "needs_review" in row and f"{kernel['speedup']:.2f}x" in row and str(review["candidate"]) in row
    assert review["command"] in shown.stdout and "awaits review" in shown.stdout
    detail = json.loads(run_cli("runs", "show", "latest", "--db", db, "--json").stdout)["kernels"][0]
    assert detail["status"] == "needs_review" and detail["best_candidate"] == review["candidate"]
    assert detail["speedup"] == pytest.approx(kernel["speedup"]) and detail["best_ms"] == pytest.approx(
        kernel["best_ms"]
    )
    assert detail["review"] == review and detail["reason"] == kernel["reason"]


def test_report_shows_the_flagged_best_and_the_command(flagged: dict) -> None:
    out = flagged["tmp"] / "report.html"
    proc = run_cli("report", "latest", "-o", str(out), "--db", str(flagged["db"]))
    assert proc.returncode == 0, proc.stderr[-2000:]
    html = out.read_text()
    review = flagged["kernel"]["review"]
    low, high = review["speedup_ci"]
    assert (
        'class="status s-needs_review">needs_review<' in html
        and "awaiting review</span> candidate " + str(review["candidate"]) in html
    )
    assert f"<code>{review['command']}</code>" in html and f"[{low:.3f}, {high:.3f}]" in html
    assert "<b>0</b><span>improved</span>" in html and "<b>1</b><span>awaiting review</span>" in html


def test_export_refusal_names_the_candidate_and_the_command_that_ships_it(flagged: dict) -> None:
    tmp, review = flagged["tmp"], flagged["kernel"]["review"]
    db = tmp / "approved.db"
    with sqlite3.connect(flagged["db"]) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    args = ("--name", "mykernels", "--sandbox", str(flagged["sandbox"]), "--threads", "1")
    refused = run_cli(
        "export", "latest", "--out", str(tmp / "refused"), "--db", str(flagged["db"]), *args, env={"COLUMNS": "200"}
    )
    assert refused.returncode == 0, refused.stderr[-2000:]
    assert "not exported: softmax64" in refused.stderr and "awaits review" in refused.stderr
    assert (
        f"candidate {review['candidate']} at {review['speedup']:.2f}x" in refused.stderr
        and review["command"] in refused.stderr
    )
    assert not (tmp / "refused" / "mykernels" / "_kernel_softmax64.py").exists()

    command = review["command"].replace(
        str(flagged["db"]), str(db)
    )  # the same command, on a copy so other tests keep the unreviewed run
    approved = run_cli(*approve_argv(command))
    assert approved.returncode == 0 and "approved by" in approved.stdout, approved.stderr
    assert (
        json.loads(run_cli("runs", "show", "latest", "--db", str(db), "--json").stdout)["kernels"][0]["review"][
            "decision"
        ]
        == "approve"
    )
    shipped = run_cli("export", "latest", "--out", str(tmp / "shipped"), "--db", str(db), *args)
    assert shipped.returncode == 0, shipped.stderr[-2000:]
    assert (tmp / "shipped" / "mykernels" / "_kernel_softmax64.py").exists(), shipped.stderr
    assert f"exported softmax64: candidate {review['candidate']}" in shipped.stdout


def test_improved_kernel_still_mentions_a_faster_flagged_one(tmp_path: Path) -> None:
    """An accepted candidate and a faster flagged one: `improved` with the accepted one, and the flagged one named.
    A loaded machine can flag the middle candidate too (timer checks) or push it over the bound: try
    a fresh run again."""
    outcome = []
    for attempt in range(3):
        db = tmp_path / f"runs{attempt}.db"
        proc = optimize(db, tmp_path / "sandbox", [fenced(MIDDLE), fenced((CANDIDATES / "faster.py").read_text())], 2.8)
        run_id = int(re.search(r"^run (\d+): ", proc.stderr, re.MULTILINE).group(1))
        outcome = verdicts(db, run_id)
        statuses = [status for _, status, *_ in outcome]
        if statuses == ["faster", "flagged"] and outcome[1][2] > outcome[0][2]:
            break
    else:
        pytest.fail(f"no run gave one accepted and one faster flagged candidate: {outcome}")
    (accepted, _, accepted_speedup, a_low, a_high, _), (flagged_id, _, flagged_speedup, low, high, reason) = outcome
    row = next(line for line in proc.stdout.splitlines() if line.strip("│┃ ").startswith("softmax64"))
    # its number of record; `re-timing` (`re-tim…` in 80 columns) where its early look is too wide to quote
    quoted = f"{accepted_speedup:.2f}x" in row or ("re-tim" in row and a_high > 3 * a_low)
    assert "improved" in row and str(accepted) in row and quoted, proc.stdout
    command = f"kernel-agent review approve {flagged_id} --db {db}"
    line = next(line for line in proc.stdout.splitlines() if line.startswith("softmax64: "))
    assert (
        f"candidate {flagged_id} at {flagged_speedup:.2f}x [{low:.2f}, {high:.2f}] awaits review ({reason})" in line
        and command in line
    )
    detail = json.loads(run_cli("runs", "show", str(run_id), "--db", str(db), "--json").stdout)["kernels"][0]
    assert detail["status"] == "improved" and detail["best_candidate"] == accepted
    assert detail["review"]["candidate"] == flagged_id and detail["review"]["command"] == command
