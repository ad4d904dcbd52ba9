"""A candidate measured faster than the roofline floor is flagged, never accepted silently."""

from __future__ import annotations

from pathlib import Path

from conftest import SOFTMAX

from kernel_agent.core.verdict import Verdict
from kernel_agent.db.session import open_database
from kernel_agent.db.writes import create_run
from kernel_agent.measure.profile import Ceilings
from kernel_agent.optimize.kernel_loop import KernelLoop, LoopOptions, Shared
from kernel_agent.problem.load import load_problem
from kernel_agent.propose.base import Attempt
from kernel_agent.propose.search import SearchProvider


def verdict(candidate_ms: float) -> Verdict:
    timing = {"per_shape": [{"shape": [256, 2048], "dtype": "float32", "baseline_median_ms": 2.0, "candidate_median_ms": candidate_ms}],
              "baseline": {"median_ms": 2.0}, "candidate": {"median_ms": candidate_ms}}
    return Verdict(status="faster", correct=True, speedup=2.0 / candidate_ms, speedup_ci=[1.5, 2.5], timing=timing)


def loop(tmp_path: Path, gbps: float) -> KernelLoop:
    db = open_database(str(tmp_path / "runs.db"))
    ceilings = Ceilings(fingerprint="test", device_name="test cpu", memory_gbps=gbps, gflops={"float32": 1e6})
    return KernelLoop(db, create_run(db, "search", None, {}), load_problem(SOFTMAX), SearchProvider(), LoopOptions(), shared=Shared(ceilings={"cpu": ceilings}))


def test_faster_than_the_floor_is_flagged(tmp_path: Path) -> None:
    # 256 x 2048 fp32 in and out is 4 MiB: at 1 GB/s the floor is about 4.2 ms, so 1 ms is impossible.
    checked = loop(tmp_path, gbps=1.0)._check_floor(verdict(1.0))
    assert checked.status == "flagged" and "faster than the roofline floor" in checked.reason


def test_a_plausible_time_stays_faster(tmp_path: Path) -> None:
    checked = loop(tmp_path, gbps=1000.0)._check_floor(verdict(1.0))
    assert checked.status == "faster" and not checked.flags


def test_a_best_near_the_roofline_stops_the_kernel(tmp_path: Path) -> None:
    # 4 MiB at 4.2 GB/s: a floor of about 1.0 ms; a best at 1.05 ms is at 0.95 of it.
    near = loop(tmp_path, gbps=4.2)
    near.accepted_verdicts[7] = verdict(1.05)
    near.attempts[7] = Attempt(7, "src", "faster", "", 2.0 / 1.05, "", 1)
    assert "stopped early: the best runs at 0.95 of the roofline floor" in near._near_roofline()
    near.options.roofline_stop = 0  # disabled
    assert near._near_roofline() == ""
    (tmp_path / "far").mkdir()
    far = loop(tmp_path / "far", gbps=1000.0)
    far.accepted_verdicts[7] = verdict(1.05)
    far.attempts[7] = Attempt(7, "src", "faster", "", 2.0 / 1.05, "", 1)
    assert far._near_roofline() == ""
