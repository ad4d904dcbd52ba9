"""The review page's records from a stored run (real SQLite, no server): queue order, states, evidence, diffs."""

from __future__ import annotations

from pathlib import Path

from review_pages import HOSTILE_SOURCES, honest_run, hostile_run

from kernel_agent.db.session import open_database
from kernel_agent.review.decisions import record
from kernel_agent.review.web.page import gather


def test_the_page_lists_the_queue_best_first_with_each_latest_decision(tmp_path: Path) -> None:
    run = honest_run(tmp_path / "runs.db")
    db = open_database(str(run["db"]))
    fast, chunked = run["ids"]
    record(db, chunked, "reject", "first look", reviewer="bob")
    record(db, chunked, "approve", "second look", reviewer="carol")
    (kernel,) = gather(db, run["run_id"], "carol").kernels
    assert [(c.id, c.state) for c in kernel.candidates] == [(fast, "awaiting"), (chunked, "approved")]
    shown = kernel.candidates[1]
    assert shown.decision is not None and (shown.decision.reviewer, shown.decision.note) == ("carol", "second look")
    best = kernel.candidates[0]
    assert best.number == "3.900x [3.600, 4.200]" and best.speed_class.startswith("FAST: ")
    assert set(best.versus) == {"eager", "compile"} and best.checks == "4/4 passed (float32)"
    assert [s.origin for s in best.lineage] == ["baseline", "search"]
    assert [d.title for d in best.diffs] == ["against the baseline"]  # the parent is the baseline: one diff
    assert any(r.kind != "equal" and "softmax" in r.new_html for r in best.diffs[0].rows)
    assert '"candidate_id": ' + str(fast) in (best.certificate or "")


def test_only_the_source_with_direction_controls_is_marked(tmp_path: Path) -> None:
    run = hostile_run(tmp_path / "hostile.db")
    (kernel,) = gather(open_database(str(run["db"])), run["run_id"], "me").kernels
    marked = {c.id: c.direction for c in kernel.candidates if c.direction}
    direction = run["ids"][list(HOSTILE_SOURCES).index("direction")]
    assert marked == {direction: ["U+202E", "U+2066", "U+2069"]}
    assert all(c.status == "flagged" and c.state == "awaiting" for c in kernel.candidates)
