"""`--executor` and `--ray-address` live in the stored plan; plans stored before them still load (as local)."""

from __future__ import annotations

from pathlib import Path

from conftest import SOFTMAX, run_cli

from kernel_agent.optimize.run import KernelSpec, RunPlan


def test_old_plans_load_as_local_and_new_ones_keep_their_executor() -> None:
    old = {"kernels": [{"path": str(SOFTMAX)}], "provider": "search", "rounds": 2, "workers": None}
    plan = RunPlan.from_json(old)
    assert (plan.executor, plan.ray_address, plan.search.proposal_rounds) == ("local", None, 2)
    stored = RunPlan([KernelSpec(path=str(SOFTMAX))], "search", executor="ray", ray_address="head:6379").to_json()
    assert RunPlan.from_json(stored).executor == "ray" and RunPlan.from_json(stored).ray_address == "head:6379"


def test_executor_options_are_checked_before_any_work(tmp_path: Path) -> None:
    bad = run_cli("optimize", str(SOFTMAX), "--db", str(tmp_path / "runs.db"), "--executor", "slurm")
    assert bad.returncode == 2 and "'--executor': must be local or ray, not 'slurm'" in bad.stderr
    mixed = run_cli(
        "optimize", str(SOFTMAX), "--db", str(tmp_path / "runs.db"), "--executor", "local", "--ray-address", "head:6379"
    )
    assert mixed.returncode == 2 and "--ray-address needs --executor ray" in mixed.stderr
