"""Runs for the review page's tests, written straight into a real SQLite file through the database layer.

Why not `optimize` (review_runs.py): the page shows stored verdicts, and the hostile set needs reasons, flags and
output no honest evaluation would produce; writing the rows keeps the tests fast and free of timing. The honest
run's sources are real kernels of the softmax64 fixture, so `export` re-verifies them for real.
"""

from __future__ import annotations

from pathlib import Path

from conftest import CANDIDATES, SOFTMAX, timing_record

from kernel_agent.core.timing_result import Resolution
from kernel_agent.core.verdict import Verdict
from kernel_agent.db import writes as store
from kernel_agent.db.session import open_database
from kernel_agent.problem.load import load_problem

# Float32 chunks instead of the baseline's float64 ones: a correct rewrite, slower than torch.softmax.
CHUNKED = """import torch

CHUNK = 64


def kernel(x):
    out = torch.empty_like(x)
    for start in range(0, x.shape[0], CHUNK):
        block = x[start : start + CHUNK]
        e = torch.exp(block - block.amax(dim=-1, keepdim=True))
        out[start : start + CHUNK] = e / e.sum(dim=-1, keepdim=True)
    return out
"""

SENTINEL = "window.__pwned = 1"  # what every hostile script would set; the browser test asserts it never is
# Each hostile text tries something different: run script, load something, approve its own candidate.
HOSTILE_SOURCES = {
    "script": (
        f"import torch\n\n# </td></tr></table><script>{SENTINEL}</script>\n\n\n"
        "def kernel(x):\n    return torch.softmax(x, -1)\n"
    ),
    "handlers": (
        'import torch\n\nDOC = "<img src=x onerror=\\"' + SENTINEL + '\\"><svg onload=\\"' + SENTINEL + '\\">"\n'
        '# <a href="javascript:' + SENTINEL + '">click me</a> <iframe src="javascript:' + SENTINEL + '"></iframe>\n\n\n'
        "def kernel(x):\n    return torch.softmax(x, dim=-1)\n"
    ),
    "self_approval": (
        "import torch\n\n"
        '# <form method="post" action="decide"><input name="candidate" value="ID"><input name="decision"'
        ' value="approve"><button autofocus>ok</button></form><img src="decide?candidate=ID&decision=approve">\n'
        '# <meta http-equiv="refresh" content="0; url=decide"><base href="http://evil.example/">\n'
        "# <script>fetch('decide', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-CSRF-Token':"
        " document.querySelector('meta[name=csrf-token]').content}, body: JSON.stringify({candidate: ID,"
        " decision: 'approve'})})</script>\n\n\ndef kernel(x):\n    return torch.softmax(x, dim=-1)\n"
    ),
    # Trojan Source: the comment's text reads as if the return were commented out; it is not.
    "direction": (
        "import torch\n\n\ndef kernel(x):\n"
        '    access = "user\u202e \u2066# admin only\u2069 \u2066"  # check\n'
        "    return torch.softmax(x, dim=-1)\n"
    ),
}
HOSTILE_REASON = (
    f'<script>{SENTINEL}</script><b onmouseover="{SENTINEL}">bold</b> [red]markup[/red] '
    '<form method="post" action="decide"><input name="decision" value="approve"><button autofocus>ok</button></form>'
)
HOSTILE_OUTPUT = f"<style>@import url(http://evil.example/x.css);</style><img src=http://evil.example/p.png>{SENTINEL}"


def verdict(status: str, speedup: float, ci: tuple[float, float], reason: str = "", **extra: object) -> Verdict:
    words = "faster beyond the 3% band"
    resolution = Resolution(
        target=0.03, half_width=0.02, mde=0.05, ended_by="rounds", budget_s=8.0, speed_class="FAST", words=words
    )
    timing = timing_record(speedup, ci, resolution=resolution)
    cases = [f"shape=[{rows}, 2048] dtype=float32 inputs={kind}" for rows in (7, 256) for kind in ("normal", "large")]
    return Verdict(
        status=status,
        checks=[{"case": case, "passed": True} for case in cases],
        tolerances={"float32": {"atol": 1e-5, "rtol": 1e-5}},
        reason=reason,
        speedup=speedup,
        speedup_ci=list(ci),
        timing=timing,
        device="cpu",
        isolation="bwrap",
        backend="torch",
        environment={"device_name": "cpu (test)", "torch": "2.x"},
        **extra,  # type: ignore[arg-type]
    )


def stored_run(db_path: Path, candidates: list[tuple[str, Verdict]]) -> dict:
    """A finished run of the softmax64 fixture: its baseline, then each (source, verdict) as a search candidate
    whose parent is the baseline. Returns the run id and the candidates' ids in order."""
    db = open_database(str(db_path))
    problem = load_problem(SOFTMAX)
    run_id = store.create_run(db, "scripted", "test-model", {})
    problem_id = store.ensure_problem(db, problem)
    run_kernel_id = store.add_run_kernel(db, run_id, problem_id, device="cpu")
    common = dict(run_id=run_id, run_kernel_id=run_kernel_id, problem_id=problem_id, round=1)
    baseline = store.add_candidate(
        db,
        **common,  # type: ignore[arg-type]
        source=problem.baseline_source,
        baseline_source=problem.baseline_source,
        parent_id=None,
        parent_source=None,
        origin="baseline",
    )
    store.add_evaluation(db, baseline, verdict("correct", 1.0, (0.98, 1.02)), 1.0)
    ids = []
    for source, judged in candidates:
        ids.append(
            store.add_candidate(
                db,
                **common,  # type: ignore[arg-type]
                source=source,
                baseline_source=problem.baseline_source,
                parent_id=baseline,
                parent_source=problem.baseline_source,
                origin="search",
            )
        )
        store.add_evaluation(db, ids[-1], judged, 1.0)
    best = max(range(len(ids)), key=lambda i: candidates[i][1].speedup or 0.0)
    store.update_run_kernel(
        db,
        run_kernel_id,
        status="improved",
        best_candidate_id=ids[best],
        best_speedup=candidates[best][1].speedup,
        best_ms=2.0 / (candidates[best][1].speedup or 1.0),
    )
    store.finish_run(db, run_id, "done")
    return {"db": db_path, "run_id": run_id, "ids": ids, "kernel": problem.name}


def honest_run(db_path: Path) -> dict:
    """Two accepted rewrites: torch.softmax (3.9x, shown first) and float32 chunks (1.8x)."""
    return stored_run(
        db_path,
        [
            ((CANDIDATES / "faster.py").read_text(), verdict("faster", 3.9, (3.6, 4.2))),
            (CHUNKED, verdict("faster", 1.8, (1.7, 1.9))),
        ],
    )


def hostile_run(db_path: Path) -> dict:
    """Flagged candidates whose source, reason, flags, note and output carry markup, script and direction controls."""
    found = []
    for index, source in enumerate(HOSTILE_SOURCES.values()):
        judged = verdict(
            "flagged",
            5.0 - index * 0.5,
            (4.0 - index * 0.5, 6.0 - index * 0.5),
            reason=HOSTILE_REASON,
            flags=[f'<a href="javascript:{SENTINEL}">flag</a>', "<script>" + SENTINEL + "</script>"],
            candidate_output=HOSTILE_OUTPUT,
        )
        found.append((source.replace("ID", str(index + 2)), judged))  # ids: the baseline is 1, then in order
    return stored_run(db_path, found)
