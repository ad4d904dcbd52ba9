"""Measurement rows (db/models.py MEASUREMENTS: the baseline's A/A run and a best's re-timing) on a real SQLite
file: never reviewed, shipped, counted or picked as best_verified, while `runs show` takes its number of record
from a faster re-timing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conftest import timing_record

from kernel_agent.core.verdict import Verdict
from kernel_agent.db import review_reads as rq
from kernel_agent.db import writes as store
from kernel_agent.db.reads import run_detail
from kernel_agent.db.session import Database, open_database
from kernel_agent.export.package import choose_winner
from kernel_agent.problem.load import load_problem
from kernel_agent.review.decisions import ReviewError, may_ship, queue, record

SOFTMAX = Path(__file__).resolve().parents[2] / "fixtures" / "softmax64"


def timed(status: str, speedup: float, ci: tuple[float, float]) -> Verdict:
    timing = timing_record(speedup, ci, per_shape=[])  # the overall medians: 2.0 and 2.0 / speedup ms
    return Verdict(status=status, correct=True, speedup=speedup, speedup_ci=list(ci), timing=timing)


def kernel(tmp_path: Path, retime_status: str) -> tuple[Database, int, dict[str, int]]:
    """A kernel with its baseline, a flagged candidate at 3x, the best at 2x (early look) and its re-timing at
    4x: a re-timing counted as a variant would hide the flagged one, be reviewed first and ship."""
    db = open_database(str(tmp_path / "runs.db"))
    problem = load_problem(SOFTMAX)
    run_id = store.create_run(db, "search", None, {})
    problem_id = store.ensure_problem(db, problem)
    run_kernel_id = store.add_run_kernel(db, run_id, problem_id)
    common = dict(run_id=run_id, run_kernel_id=run_kernel_id, problem_id=problem_id, round=1)
    ids: dict[str, int] = {}
    for name, origin, source, parent, verdict, variant in [
        ("baseline", "baseline", problem.baseline_source, None, timed("correct", 1.0, (0.9, 1.1)), True),
        ("flagged", "search", "def kernel(x):\n    return x * 3\n", "baseline", timed("flagged", 3.0, (2, 4)), True),
        ("best", "search", "def kernel(x):\n    return x\n", "baseline", timed("faster", 2.0, (1.1, 9.0)), True),
        ("retime", "retime", "def kernel(x):\n    return x\n", "best", timed(retime_status, 4.0, (3.8, 4.2)), False),
    ]:
        ids[name] = store.add_candidate(
            db,
            **common,  # type: ignore[arg-type]
            source=source,
            baseline_source=problem.baseline_source,
            parent_id=ids.get(parent) if parent else None,
            parent_source=None,
            origin=origin,
            variant=variant,
        )
        store.add_evaluation(db, ids[name], verdict, 1.0)
    store.update_run_kernel(
        db, run_kernel_id, status="improved", best_candidate_id=ids["best"], best_speedup=4.0, best_ms=0.5
    )
    return db, run_id, ids


def test_a_retime_is_never_reviewed_shipped_counted_or_best_verified(tmp_path: Path) -> None:
    db, run_id, ids = kernel(tmp_path, "faster")
    (k,) = rq.run_kernels(db, run_id)
    retime = next(c for c in k.candidates if c.id == ids["retime"])
    assert [c.id for c in rq.reviewable(k)] == [ids["flagged"], ids["best"]]
    assert [[c.id for c in found] for _, found in queue(db, run_id)] == [[ids["flagged"], ids["best"]]]
    assert not may_ship(retime) and may_ship(next(c for c in k.candidates if c.id == ids["best"]))
    awaiting = rq.awaiting_review(k)
    assert awaiting is not None and awaiting.id == ids["flagged"]  # the 4x re-timing does not outrank it
    winner, _ = choose_winner(k, approved_only=False)
    assert winner is not None and winner.id == ids["best"]
    with pytest.raises(ReviewError, match=f"re-timing of candidate {ids['best']}, not a variant"):
        record(db, ids["retime"], "approve")
    (shown,) = run_detail(db, run_id)["kernels"]  # type: ignore[index]
    assert shown["statuses"] == {"flagged": 1, "faster": 1}
    assert shown["best_verified_speedup"] == 4.0  # fast_p counts the number of record: the faster re-timing
    assert (shown["best_candidate"], shown["record_candidate"]) == (ids["best"], ids["retime"])
    assert shown["speedup_ci"] == [3.8, 4.2]  # the number of record: the faster re-timing's interval


def test_a_retime_that_is_not_faster_leaves_the_best_own_interval_on_record(tmp_path: Path) -> None:
    db, run_id, ids = kernel(tmp_path, "correct")
    (shown,) = run_detail(db, run_id)["kernels"]  # type: ignore[index]
    assert (shown["record_candidate"], shown["speedup_ci"]) == (ids["best"], [1.1, 9.0])
    assert shown["best_verified_speedup"] == 2.0  # the early look stands for fast_p too
    assert shown["statuses"] == {"flagged": 1, "faster": 1}  # nor is it counted as `correct`
    with sqlite3.connect(tmp_path / "runs.db") as connection:
        hashes = connection.execute("select origin, normalized_hash is null from candidates order by id").fetchall()
    assert hashes == [("baseline", 0), ("search", 0), ("search", 0), ("retime", 1)]


@pytest.mark.parametrize(("status", "quoted"), [("faster", "retime"), ("correct", "best")])
def test_export_quotes_the_number_of_record_and_ships_the_best(tmp_path: Path, status: str, quoted: str) -> None:
    db, run_id, ids = kernel(tmp_path, status)
    (k,) = rq.run_kernels(db, run_id)
    winner, _ = choose_winner(k, approved_only=False)
    assert winner is not None and winner.id == ids["best"]
    assert k.number_of(winner).candidate == ids[quoted]
