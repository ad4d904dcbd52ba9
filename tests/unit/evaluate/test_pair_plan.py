"""How many pairs of processes time a candidate, and the line that says why one where --processes asked more."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import EXAMPLES

from kernel_agent.cli.eval_cmd import speed_line
from kernel_agent.evaluate import timing
from kernel_agent.evaluate.pipeline import EvalOptions
from kernel_agent.problem.load import load_problem


def context(processes: int, device: str = "cpu", problem: str = "cpp_softmax") -> SimpleNamespace:
    return SimpleNamespace(
        problem=load_problem(EXAMPLES / problem), options=EvalOptions(processes=processes), device=device
    )


def test_a_small_cpu_problem_gets_the_pairs_asked_for() -> None:
    assert timing.process_pairs(context(3)) == timing.PairPlan(3)
    assert timing.process_pairs(context(1)) == timing.PairPlan(1)  # asked for one: nothing to explain


def test_one_pair_where_more_were_asked_says_why(monkeypatch) -> None:
    on_gpu = timing.process_pairs(context(3, device="cuda"))
    assert on_gpu.count == 1 and "on cuda" in on_gpu.why_one
    monkeypatch.setattr(timing, "sized", lambda problem: SimpleNamespace(working_set=512 << 20))
    large = timing.process_pairs(context(3))
    assert large.count == 1 and "512 MiB" in large.why_one and "3 pairs asked" in large.why_one
    record = {
        "resolution": {"class": "AMBIGUOUS", "words": "could not resolve", "mde": 0.2, "ended_by": "budget"},
        "process_effect": 0.08,
        "processes": {"pairs": 1, "why_one": large.why_one},
    }
    assert f"8% assumed (one pair: {large.why_one})" in speed_line(record)
