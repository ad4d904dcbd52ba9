"""A candidate measured faster than the roofline floor is flagged, never accepted silently, by
`eval` and `optimize` alike."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import CANDIDATES, SOFTMAX, run_cli, shape_timing, timing_record
from scripted_server import ScriptedServer

from kernel_agent.core.timing_result import Summary
from kernel_agent.core.verdict import Verdict
from kernel_agent.db.session import open_database
from kernel_agent.db.writes import create_run, store_ceilings
from kernel_agent.measure.ceilings import Ceilings, fingerprint_key
from kernel_agent.optimize.kernel_loop import KernelLoop, LoopOptions, Shared
from kernel_agent.optimize.search_state import Candidate
from kernel_agent.problem.load import load_problem
from kernel_agent.propose.search import SearchProvider


def fenced(path: Path) -> str:
    return f"Here is a faster kernel.\n```python\n{path.read_text()}```\n"


def verdict(candidate_ms: float) -> Verdict:
    timing = timing_record(
        2.0 / candidate_ms,
        (1.5, 2.5),
        baseline=Summary(2.0, 2.0, 2.0, 2.0, 40),
        candidate=Summary(candidate_ms, candidate_ms, candidate_ms, candidate_ms, 40),
        per_shape=[shape_timing((256, 2048), base_ms=2.0, cand_ms=candidate_ms)],
    )
    return Verdict(status="faster", correct=True, speedup=2.0 / candidate_ms, speedup_ci=[1.5, 2.5], timing=timing)


def loop(tmp_path: Path, gbps: float) -> KernelLoop:
    db = open_database(str(tmp_path / "runs.db"))
    ceilings = Ceilings(fingerprint="test", device_name="test cpu", memory_gbps=gbps, gflops={"float32": 1e6})
    return KernelLoop(
        db,
        create_run(db, "search", None, {}),
        load_problem(SOFTMAX),
        SearchProvider(),
        LoopOptions(),
        shared=Shared(ceilings={"cpu": ceilings}),
    )


def test_eval_and_optimize_give_the_same_verdict_for_the_same_candidate(tmp_path: Path) -> None:
    """Issue 12: the floor check used to live in the optimize loop only, so `eval` said faster where
    `optimize` said flagged. Both now read the same stored ceilings and go through one decision.
    The stored bandwidth here is 1 GB/s, so softmax64's 4 MiB of traffic has a 4.2 ms floor that an
    honest torch.softmax (under 1 ms) beats. Stored ceilings can be stale (issue 31, defect 2): both
    commands measure them again before flagging, find the real bandwidth, and agree that it is not
    flagged."""
    db = tmp_path / "runs.db"
    key = fingerprint_key("cpu", 1)
    store_ceilings(
        open_database(str(db)),
        key,
        {
            "fingerprint": key,
            "device_name": "test cpu",
            "memory_gbps": 1.0,
            "gflops": {"float32": 1e6},
            "measured_at": "test",
        },
    )
    proc = run_cli(
        "eval",
        str(SOFTMAX),
        str(CANDIDATES / "faster.py"),
        "--json",
        "--db",
        str(db),
        "--threads",
        "1",
        "--sandbox",
        str(tmp_path / "sandbox"),
    )
    by_eval = json.loads(proc.stdout)
    with ScriptedServer([[fenced(CANDIDATES / "faster.py")]]) as server:
        proc = run_cli(
            "optimize",
            str(SOFTMAX),
            "--db",
            str(db),
            "--sandbox",
            str(tmp_path / "sandbox"),
            "--threads",
            "1",
            "--json",
            *server.provider_args(),
            "--rounds",
            "1",
            "--samples",
            "1",
            env={"OPENAI_API_KEY": "sk-test-not-a-real-key"},
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    with sqlite3.connect(db) as connection:
        (by_optimize,) = connection.execute(
            "select e.status from evaluations e join candidates c on c.id = e.candidate_id where c.origin != 'baseline'"
        ).fetchone()
    assert by_eval["status"] == by_optimize and by_eval["status"] != "flagged", (by_eval["reason"], by_optimize)
    assert "remeasured_before_flag" in by_eval["roofline"]


def test_a_kernel_faster_than_a_floor_that_holds_when_measured_again_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The machine measured again still gives 1 GB/s, a copy of the problem's own size too (both stand in
    for a machine that slow): the floor holds, and a kernel under it needs a human."""
    from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
    from kernel_agent.measure import ceilings

    slow = Ceilings(fingerprint="test", device_name="test cpu", memory_gbps=1.0, gflops={"float32": 1e6})
    monkeypatch.setattr(ceilings, "measure_ceilings", lambda device, threads=None: slow)
    monkeypatch.setattr(ceilings, "measure_bandwidth", lambda device, nbytes=None, repeats=None: 1.0)
    options = EvalOptions(sandbox_root=tmp_path, threads=1, ceilings=slow)
    verdict = evaluate(load_problem(SOFTMAX), (CANDIDATES / "faster.py").read_text(), options)
    assert verdict.status == "flagged" and "faster than the roofline floor" in verdict.reason, verdict.reason
    assert verdict.roofline["remeasured_before_flag"]["at"] == ""


def test_a_best_near_the_roofline_stops_the_kernel(tmp_path: Path) -> None:
    # 4 MiB at 4.2 GB/s: a floor of about 1.0 ms; a best at 1.05 ms is at 0.95 of it.
    near = loop(tmp_path, gbps=4.2)
    near.state.remember(Candidate(7, "src", "", 1), verdict(1.05))
    assert "stopped early: the best runs at 0.95 of the roofline floor" in near._near_roofline()
    near.options.search.roofline_stop = 0  # disabled
    assert near._near_roofline() == ""
    (tmp_path / "far").mkdir()
    far = loop(tmp_path / "far", gbps=1000.0)
    far.state.remember(Candidate(7, "src", "", 1), verdict(1.05))
    assert far._near_roofline() == ""


def test_measured_ceilings_carry_their_spread_and_the_load_they_were_measured_under() -> None:
    from kernel_agent.measure.ceilings import ceilings_from_dict, ceilings_to_dict, measure_ceilings

    ceilings = measure_ceilings("cpu", budget_s=0.5, threads=1)
    assert 0.0 <= ceilings.spread < 1.0 and 0.0 <= ceilings.load <= 1.0
    assert ceilings_from_dict(ceilings_to_dict(ceilings)) == ceilings
    old = {"fingerprint": "k", "device_name": "cpu", "memory_gbps": 5.0, "gflops": {}, "measured_at": "t"}
    assert ceilings_from_dict(old).spread == 0.0  # stored before they were recorded
