"""`optimize --device cpu,cuda`: one run, one kernel entry per listed device (real CLI, real sandboxes, real
SQLite). On a machine without CUDA (this one, CI) the CUDA entry ends with its one-line reason and evaluates
nothing, the CPU entry is optimized as usual, `runs show` shows both, a resume redoes neither, and the
hf-kernels export puts the CPU winner in build/torch-cpu while build/torch-cuda runs the reference.

Cost here (2 shared, loaded cores): one one-round run on cpp_softmax (baseline and one scripted candidate), one
resume that evaluates nothing, one export re-verifying one winner: about a minute.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import torch
from conftest import EXAMPLES, run_cli
from review_runs import build_run

pytestmark = pytest.mark.slow
PROBLEM = EXAMPLES / "cpp_softmax"
# What the CUDA entry of a CPU problem says: the first reason on a machine without CUDA, the second with one.
CUDA_REASON = (
    "no CUDA device is visible here"
    if not torch.cuda.is_available()
    else "cpp_softmax runs on the cpu only (its problem sets DEVICE = 'cpu')"
)


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        return connection.execute(sql).fetchall()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("devices")
    return build_run(
        tmp,
        problem=PROBLEM,
        candidate=PROBLEM / "candidates" / "faster.py",
        extra=("--device", "cpu,cuda", "--no-references"),
        db=tmp / "runs.db",
    )


def test_each_listed_device_gets_its_own_kernel_entry_and_cuda_is_never_run_on_the_cpu(run: dict) -> None:
    db = run["db"]
    (cpu, cuda) = rows(db, "SELECT device, status, reason FROM run_kernels ORDER BY id")
    assert cuda == ("cuda", "no_device", CUDA_REASON) and cpu[:2] == ("cpu", "improved")
    # no reason, or why its number reads `re-timing`: an early look too wide to quote (conftest: --no-retime-best)
    assert cpu[2] == "" or cpu[2].startswith("the early look of candidate"), cpu
    # The CUDA entry stored no candidate at all (not even its baseline): nothing ran in its name, here or elsewhere.
    assert rows(
        db,
        "SELECT k.device, count(c.id), count(e.id), group_concat(DISTINCT e.device) FROM run_kernels k "
        "LEFT JOIN candidates c ON c.run_kernel_id = k.id LEFT JOIN evaluations e ON e.candidate_id = c.id "
        "GROUP BY k.id ORDER BY k.id",
    ) == [("cpu", 2, 2, "cpu"), ("cuda", 0, 0, None)]
    assert rows(db, "SELECT status FROM runs") == [("completed",)]

    shown = run_cli("runs", "show", str(run["run_id"]), "--db", str(db), "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    detail = json.loads(shown.stdout)
    assert [(k["name"], k["device"], k["status"], k["reason"]) for k in detail["kernels"]] == [
        ("cpp_softmax", "cpu", "improved", ""),
        ("cpp_softmax", "cuda", "no_device", CUDA_REASON),
    ]
    assert detail["kernels"][0]["best_candidate"] == run["best"] and detail["kernels"][1]["best_candidate"] is None
    assert detail["options"]["devices"] == ["cpu", "cuda"]
    assert [k["device"] for k in detail["options"]["kernels"]] == ["cpu", "cuda"]
    assert detail["metrics"]["n"]["baseline"] == 1  # the entry that never ran is not counted in fast_p

    table = run_cli("runs", "show", str(run["run_id"]), "--db", str(db))
    assert table.returncode == 0, table.stderr[-2000:]
    assert "device" in table.stdout and f"cpp_softmax (cuda): {CUDA_REASON}" in table.stdout


def test_a_resume_redoes_no_finished_entry(run: dict) -> None:
    """The run as a kill would leave it after the CPU entry's last round: that entry still `running`, the CUDA
    one finished. The resume reopens each (kernel, device) row: no new row, candidate or evaluation, and the
    CUDA entry's stored ending is returned as stored (a marker in its reason shows it was not redone)."""
    db = run["db"]
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE runs SET status = 'interrupted'")
        connection.execute("UPDATE run_kernels SET status = 'running' WHERE device = 'cpu'")
        connection.execute(f"UPDATE run_kernels SET reason = '{CUDA_REASON} [stored]' WHERE device = 'cuda'")
    before = rows(db, "SELECT (SELECT count(*) FROM candidates), (SELECT count(*) FROM evaluations)")
    proc = run_cli(
        "optimize",
        "--resume",
        str(run["run_id"]),
        "--db",
        str(db),
        "--json",
        env={"OPENAI_API_KEY": "sk-test-not-a-real-key"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert [(k["device"], k["status"], k["best_candidate"]) for k in result["kernels"]] == [
        ("cpu", "improved", run["best"]),
        ("cuda", "no_device", None),
    ]
    assert result["kernels"][1]["reason"] == f"{CUDA_REASON} [stored]"
    assert rows(db, "SELECT (SELECT count(*) FROM candidates), (SELECT count(*) FROM evaluations)") == before
    assert rows(db, "SELECT device, status FROM run_kernels ORDER BY id") == [
        ("cpu", "improved"),
        ("cuda", "no_device"),
    ]
    assert rows(db, "SELECT status FROM runs") == [("completed",)]
    assert "resuming run" in proc.stderr and "cpp_softmax (cuda): done: no_device" in proc.stderr


def test_hf_kernels_export_puts_the_cpu_winner_in_the_cpu_variant_and_cuda_runs_the_reference(run: dict) -> None:
    out = run["db"].parent / "hf"
    proc = run_cli(
        "export",
        str(run["run_id"]),
        "--format",
        "hf-kernels",
        "--out",
        str(out),
        "--name",
        "multi_kernels",
        "--db",
        str(run["db"]),
        "--sandbox",
        str(run["sandbox"]),
        "--threads",
        "1",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "build/torch-cuda: no winner verified on cuda for cpp_softmax; it runs their references" in proc.stderr
    assert "build/torch-cpu: no winner" not in proc.stderr
    cpu, cuda = out / "build" / "torch-cpu", out / "build" / "torch-cuda"
    assert (cpu / "_kernel_cpp_softmax_cpu.py").is_file()
    assert not list(cuda.glob("_kernel_*.py"))
    provenance = json.loads((cpu / "metadata.json").read_text())["kernel-agent"]
    ((entry,),) = provenance["candidates"].values()
    assert list(provenance["candidates"]) == ["cpp_softmax"]
    assert (entry["device"], entry["run"], entry["candidate"]) == ("cpu", run["run_id"], run["best"])
    assert f'"candidates": {{"cpu": [{run["run_id"]}, {run["best"]}]}}' in (cpu / "__init__.py").read_text()
    assert '"fallback": {},' in (cpu / "__init__.py").read_text()
    assert (
        f'"fallback": {{"cuda": "no winner verified on cuda in run(s) [{run["run_id"]}]"}}'
        in (cuda / "__init__.py").read_text()
    )
