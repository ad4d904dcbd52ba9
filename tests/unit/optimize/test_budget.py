"""Budget arithmetic (kernel_agent/optimize/budget.py): what a kernel and its run may still spend."""

from __future__ import annotations

from kernel_agent.optimize.budget import Budget
from kernel_agent.optimize.config import BudgetLimits
from kernel_agent.propose.base import LLMCall


def call(tokens: int, cost: float = 0.0, cached: bool = False) -> LLMCall:
    return LLMCall(
        "hash",
        "model",
        "url",
        {},
        [],
        prompt_tokens=tokens // 2,
        completion_tokens=tokens - tokens // 2,
        cost_usd=cost,
        cached=cached,
    )


def test_no_limits_never_stop() -> None:
    budget = Budget(BudgetLimits(), "run")
    for _ in range(100):
        assert budget.try_take_candidate() is None
    budget.charge_call(call(10**9, 10**6))
    assert budget.reached() is None and not BudgetLimits().any()


def test_candidates_are_reserved_and_the_last_one_says_why() -> None:
    budget = Budget(BudgetLimits(max_candidates=2), "kernel")
    assert budget.try_take_candidate() is None and budget.try_take_candidate() is None
    assert budget.try_take_candidate() == "kernel budget reached: 2 candidates evaluated (max 2)"
    assert budget.candidates == 2


def test_a_kernel_charges_its_run_and_a_refused_run_gives_the_kernel_its_candidate_back() -> None:
    run = Budget(BudgetLimits(max_candidates=1), "run")
    first, second = Budget(BudgetLimits(), "kernel", parent=run), Budget(BudgetLimits(), "kernel", parent=run)
    assert first.try_take_candidate() is None
    assert second.try_take_candidate() == "run budget reached: 1 candidates evaluated (max 1)"
    assert (run.candidates, first.candidates, second.candidates) == (1, 1, 0)
    assert first.reached() == second.reached() == "run budget reached: 1 candidates evaluated (max 1)"


def test_tokens_and_cost_count_paid_calls_only() -> None:
    run = Budget(BudgetLimits(token_budget=100, max_cost=1.0), "run")
    kernel = Budget(BudgetLimits(), "kernel", parent=run)
    kernel.charge_call(call(1000, 5.0, cached=True))  # from the response cache: free
    assert run.reached() is None and (run.tokens, kernel.tokens) == (0, 0)
    kernel.charge_call(call(60, 0.4))
    assert run.reached() is None
    kernel.charge_call(call(40, 0.4))
    assert kernel.reached() == "run budget reached: 100 tokens used (max 100)"
    cost = Budget(BudgetLimits(max_cost=0.5), "run")
    cost.charge_call(call(1, 0.5))
    assert cost.reached() == "run budget reached: $0.5000 spent (max $0.5000)"


def test_the_time_limit_reads_the_clock_given() -> None:
    now = [100.0]
    budget = Budget(BudgetLimits(time_limit=30), "run", clock=lambda: now[0])
    now[0] = 129.0
    assert budget.reached() is None
    now[0] = 130.0
    assert budget.reached() == "run budget reached: 30 s elapsed (limit 30 s)"
    assert budget.try_take_candidate() == budget.reached()
