"""How many pairs of processes time a candidate, and the line that says why one where --processes asked more."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import EXAMPLES, timing_record

from kernel_agent.cli.eval_cmd import speed_line
from kernel_agent.core.timing_result import Processes, Resolution, SetAside
from kernel_agent.evaluate import timed as timing
from kernel_agent.evaluate.pipeline import EvalOptions
from kernel_agent.problem.load import load_problem
from kernel_agent.timing.speed_class import SpeedClass


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
    said = Resolution(
        target=0.03, half_width=0.2, mde=0.2, ended_by="budget", budget_s=8.0, speed_class="AMBIGUOUS", words="?"
    )
    record = timing_record(1.0, (0.8, 1.2), resolution=said, processes=Processes(pairs=1, why_one=large.why_one))
    assert f"8% assumed (one pair: {large.why_one})" in speed_line(record)


def outcome(status: str, speed: str | None, speedup: float) -> timing.TimingOutcome:
    """Only what second_look reads: the decision and the point."""
    decision = SimpleNamespace(status=timing.Status(status), speed=SpeedClass(speed) if speed else None)
    return SimpleNamespace(decision=decision, estimate=SimpleNamespace(speedup=speedup))  # type: ignore[return-value]


def test_a_second_look_only_at_an_unresolved_gain_that_could_become_the_best(monkeypatch) -> None:
    ctx = context(1)
    assert timing.second_look(ctx, outcome("correct", "AMBIGUOUS", 1.09)) == 3  # one pair could not tell
    assert timing.second_look(ctx, outcome("correct", "AMBIGUOUS", 1.01)) == 0  # points to no gain
    assert timing.second_look(ctx, outcome("correct", "SAME", 1.01)) == 0  # resolved
    assert timing.second_look(ctx, outcome("correct", "SLOW", 0.7)) == 0
    assert timing.second_look(ctx, outcome("faster", "FAST", 1.5)) == 0  # resolved, accepted
    assert timing.second_look(ctx, outcome("flagged", None, 1.09)) == 0  # a human decides
    ctx.options.second_look_above = 1.2  # the search's best is 1.2x: a 1.09x cannot become it
    assert timing.second_look(ctx, outcome("correct", "AMBIGUOUS", 1.09)) == 0
    ctx.options.second_look_above, ctx.options.second_look = 1.0, 1  # --second-look 1: none
    assert timing.second_look(ctx, outcome("correct", "AMBIGUOUS", 1.09)) == 0
    ctx.options.second_look = 3
    monkeypatch.setattr(timing, "sized", lambda problem: SimpleNamespace(working_set=512 << 20))
    assert timing.second_look(ctx, outcome("correct", "AMBIGUOUS", 1.09)) == 0  # too large for several pairs
    assert timing.second_look(context(1, device="cuda"), outcome("correct", "AMBIGUOUS", 1.09)) == 0


def test_the_speed_line_says_what_one_pair_read_before_the_second_look() -> None:
    said = Resolution(
        target=0.03, half_width=0.01, mde=0.02, ended_by="settled", budget_s=8, speed_class="FAST", words="faster"
    )
    first = SetAside(speedup=1.093, ci=(0.985, 1.212))
    record = timing_record(process_effect=0.004, resolution=said, processes=Processes(pairs=3, second_look_of=first))
    line = speed_line(record)
    assert "measured over 3 process pairs" in line
    assert "a second look: one pair read 1.093x [0.985, 1.212], could not resolve" in line
