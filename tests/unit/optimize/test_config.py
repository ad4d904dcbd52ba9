"""One source for every option (core/config.py, optimize/config.py): the CLI, the stored plan and
the manifest read the same fields."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import typer
import typer.main
from typer.testing import CliRunner

from kernel_agent.cli import app
from kernel_agent.core.config import Device, Devices, EvalConfig, ExecutorKind, IsolationLevel
from kernel_agent.evaluate.pipeline import EvalOptions
from kernel_agent.optimize.config import PER_KERNEL, KernelSpec, RunPlan, SearchConfig, manifest_keys, per_device
from kernel_agent.optimize.run import PlanError, device_of, labels, load_manifest, loop_options

# A plan as the code before the config tree stored it (RunPlan.to_json of format 1, verbatim).
FORMAT_1 = {
    "kernels": [
        {
            "path": "problems/softmax",
            "rounds": 5,
            "samples": None,
            "beam": None,
            "patience": None,
            "tolerances": {"float32": [0.0001, 1e-05]},
            "backend": None,
            "max_candidates": None,
            "max_tokens": 900,
            "max_cost": None,
            "time_limit": None,
        },
        {
            "path": "problems/gelu",
            "rounds": None,
            "samples": None,
            "beam": None,
            "patience": None,
            "tolerances": None,
            "backend": None,
            "max_candidates": None,
            "max_tokens": None,
            "max_cost": None,
            "time_limit": None,
        },
    ],
    "provider": "openai",
    "provider_options": {
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "temperature": 0.2,
        "max_tokens": 1024,
        "request_timeout": 30.0,
        "max_retries": 1,
        "prompts_dir": None,
        "prices_file": "prices.toml",
        "api_key_file": None,
        "replay_run": None,
    },
    "rounds": 4,
    "samples": 3,
    "beam": 1,
    "patience": 3,
    "roofline_stop": 0.5,
    "device": "cpu",
    "timeout": 60.0,
    "min_gain": 0.05,
    "sanity_speedup": 8.0,
    "threads": 2,
    "sandbox": "sb",
    "workers": 3,
    "concurrency": 2,
    "budget": {"max_candidates": 7, "max_tokens": 5000, "max_cost": 1.5, "time_limit": None},
    "executor": "ray",
    "ray_address": "head:6379",
}


def test_a_format_1_plan_loads_with_every_old_name_in_its_new_place() -> None:
    plan = RunPlan.from_json(FORMAT_1)
    assert plan.search == SearchConfig(proposal_rounds=4, samples=3, beam=1, patience=3, roofline_stop=0.5)
    assert (
        plan.evaluation.device,
        plan.evaluation.timeout,
        plan.evaluation.min_gain,
        plan.evaluation.sanity_speedup,
    ) == (Device.CPU, 60.0, 0.05, 8.0)
    assert (plan.evaluation.threads, plan.evaluation.sandbox_root) == (2, Path("sb"))
    assert (plan.budget.max_candidates, plan.budget.token_budget, plan.budget.max_cost) == (7, 5000, 1.5)
    assert (
        plan.provider_options.tokens_per_reply,
        plan.provider_options.prices_file,
        plan.provider_options.max_retries,
    ) == (1024, Path("prices.toml"), 1)
    assert (plan.executor, plan.ray_address, plan.workers, plan.concurrency) == (ExecutorKind.RAY, "head:6379", 3, 2)
    softmax, gelu = plan.kernels
    assert (softmax.proposal_rounds, softmax.token_budget, softmax.tolerances) == (5, 900, {"float32": [0.0001, 1e-05]})
    assert gelu == KernelSpec(path="problems/gelu")


def test_an_older_plan_without_the_later_keys_takes_their_defaults() -> None:
    plan = RunPlan.from_json(
        {
            "kernels": [{"path": "p"}],
            "provider": "search",
            "provider_options": {},
            "rounds": 2,
            "workers": None,
            "budget": {},
        }
    )
    assert plan.search.proposal_rounds == 2 and plan.search.roofline_stop == SearchConfig().roofline_stop
    assert plan.executor is ExecutorKind.LOCAL and plan.evaluation == EvalConfig()


def test_a_plan_round_trips_through_json_with_its_types() -> None:
    plan = RunPlan(
        [KernelSpec("a", samples=1, backend="torch")],
        "openai",
        executor=ExecutorKind.RAY,
        evaluation=EvalConfig(device=Device.CUDA, sandbox_root=Path("/s")),
    )
    stored = plan.to_json()
    assert (
        stored["format"] == 2
        and stored["evaluation"]["device"] == "cuda"
        and stored["evaluation"]["sandbox_root"] == "/s"
    )
    again = RunPlan.from_json(stored)
    assert again == plan and again.evaluation.device is Device.CUDA and isinstance(again.evaluation.sandbox_root, Path)


def test_a_kernels_own_values_override_the_runs() -> None:
    plan = RunPlan.from_json(FORMAT_1)
    own = loop_options(plan, plan.kernels[0])
    assert (own.search.proposal_rounds, own.search.samples, own.budget.token_budget, own.budget.max_candidates) == (
        5,
        3,
        900,
        None,
    )
    assert isinstance(own.eval, EvalOptions) and (own.eval.timeout, own.eval.threads, own.eval.device) == (
        60.0,
        2,
        "cpu",
    )
    assert loop_options(plan, KernelSpec("x", backend="cpp")).eval.backend == "cpp"


def test_manifest_keys_are_the_flags_names_of_the_same_fields() -> None:
    keys = manifest_keys()
    assert keys["rounds"] == "proposal_rounds" and keys["max_tokens"] == "token_budget" and keys["backend"] == "backend"
    per_kernel = {name for names in PER_KERNEL.values() for name in names}
    assert per_kernel | {"path", "tolerances"} == set(keys.values())
    # A kernel's device comes from the run's --device list (one spec per listed device), never from a manifest.
    assert {f.name for f in dataclasses.fields(KernelSpec)} == per_kernel | {"path", "tolerances", "device"}


def test_a_manifest_sets_per_kernel_values_by_their_user_facing_names(tmp_path: Path) -> None:
    manifest = tmp_path / "kernels.toml"
    manifest.write_text(
        '[defaults]\nrounds = 1\n\n[[kernel]]\npath = "a"\nmax_tokens = 50\n\n[[kernel]]\npath = "/abs/b"\nrounds = 2\n'
    )
    first, second = load_manifest(manifest)
    assert (first.path, first.proposal_rounds, first.token_budget) == (str(tmp_path / "a"), 1, 50)
    assert (second.path, second.proposal_rounds, second.token_budget) == ("/abs/b", 2, None)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("roundz = 3", "unknown option(s) roundz"),
        ("patience = 0", "patience must be a number of at least 1, not 0"),
        ('samples = "4"', "samples must be a number of at least 1"),
    ],
)
def test_a_manifest_value_is_checked_like_its_flag(tmp_path: Path, entry: str, message: str) -> None:
    manifest = tmp_path / "bad.toml"
    manifest.write_text(f'[[kernel]]\npath = "a"\n{entry}\n')
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_manifest(manifest)


# ---- the command line -------------------------------------------------------------------------


def test_no_flags_build_the_default_plan(probe_app) -> None:
    probe, seen = probe_app()
    assert CliRunner().invoke(probe, []).exit_code == 0
    assert seen["plan"] == RunPlan() and seen["given"] == frozenset()


def test_flags_land_in_their_fields_and_given_names_them(probe_app) -> None:
    probe, seen = probe_app()
    args = [
        "--rounds",
        "5",
        "--device",
        "cpu",
        "--max-tokens",
        "100",
        "--max-tokens-per-reply",
        "50",
        "--sandbox",
        "sb",
        "--executor",
        "ray",
        "--retries",
        "0",
    ]
    result = CliRunner().invoke(probe, args)
    assert result.exit_code == 0, result.output
    plan = seen["plan"]
    assert (
        plan.search.proposal_rounds,
        plan.devices,
        plan.budget.token_budget,
        plan.provider_options.tokens_per_reply,
    ) == (5, Devices((Device.CPU,)), 100, 50)
    assert (plan.evaluation.sandbox_root, plan.executor, plan.provider_options.max_retries) == (
        Path("sb"),
        ExecutorKind.RAY,
        0,
    )
    assert seen["given"] == {
        "proposal_rounds",
        "devices",
        "token_budget",
        "tokens_per_reply",
        "sandbox_root",
        "executor",
        "max_retries",
    }


def test_a_choice_outside_its_enum_is_refused_naming_the_choices(probe_app) -> None:
    probe, _ = probe_app()
    result = CliRunner().invoke(probe, ["--executor", "gpu"])
    assert result.exit_code == 2 and "'--executor': must be local or ray, not 'gpu'" in result.output


def test_every_command_shows_the_defaults_of_the_fields_it_reads() -> None:
    """`--timeout` is declared once, in EvalConfig: eval, optimize and export show that value."""
    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    expected = {
        "timeout": EvalConfig().timeout,
        "device": Device.AUTO,
        "isolation": IsolationLevel.AUTO,
        "proposal_rounds": SearchConfig().proposal_rounds,
        "sandbox_root": EvalConfig().sandbox_root,
    }
    seen = set()
    for name in ("eval", "optimize", "export", "profile"):
        for param in commands[name].params:
            if param.name in expected:
                assert param.default == expected[param.name], (name, param.name)
                seen.add((name, param.name))
    assert {
        ("eval", "timeout"),
        ("optimize", "timeout"),
        ("export", "timeout"),
        ("optimize", "proposal_rounds"),
        ("profile", "device"),
    } <= seen


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "problem", "candidate.py"],
        ["optimize", "problem"],
        ["export", "1"],
        ["tune", "problem"],
        ["optimize", "--resume", "1"],
    ],
)
@pytest.mark.parametrize("timeout", ["0", "-5", "0.0"])
def test_every_command_refuses_a_timeout_that_is_not_positive(args: list[str], timeout: str) -> None:
    """`--timeout` > 0 is declared once, with the field (`above=0`): `eval` alone used to check it, so `optimize`,
    `export`, `tune` and a resume took 0 and every sandbox then ran with no time at all."""
    result = CliRunner().invoke(app, [*args, "--timeout", timeout])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '--timeout': must be greater than 0, not {timeout}" in result.output


def test_retime_best_is_on_by_default_and_its_off_switch_is_stored_with_the_plan(probe_app) -> None:
    """`--no-retime-best` lands in SearchConfig, so a resumed run (which reads the stored plan alone) keeps it;
    a plan stored before the option existed re-times."""
    probe, seen = probe_app()
    assert CliRunner().invoke(probe, []).exit_code == 0 and seen["plan"].search.retime_best is True
    result = CliRunner().invoke(probe, ["--no-retime-best"])
    assert result.exit_code == 0, result.output
    stored = seen["plan"].to_json()
    assert stored["search"]["retime_best"] is False and RunPlan.from_json(stored).search.retime_best is False
    del stored["search"]["retime_best"]
    assert RunPlan.from_json(stored).search.retime_best is True


# ---- --device cpu,cuda: one kernel entry per listed device --------------------------------------------------


def test_device_lists_land_in_the_plan_and_a_bad_one_is_a_usage_error_of_one_line(probe_app) -> None:
    probe, seen = probe_app()
    result = CliRunner().invoke(probe, ["--device", "cpu,cuda"])
    assert result.exit_code == 0, result.output
    assert seen["plan"].devices == Devices((Device.CPU, Device.CUDA)) and "devices" in seen["given"]
    for bad, why in [
        ("gpu", "must be auto, cpu, cuda or a comma-separated list of cpu and cuda (cpu,cuda), not 'gpu'"),
        ("cpu,gpu", "not 'cpu,gpu'"),
        ("auto,cpu", "auto stands alone"),
        ("cuda,cuda", "names cuda twice"),
    ]:
        result = CliRunner().invoke(probe, ["--device", bad])
        errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
        assert result.exit_code == 2 and len(errors) == 1, result.output
        assert errors[0].startswith("Error: Invalid value for '--device': ") and why in errors[0], errors


def test_each_kernel_becomes_one_spec_per_listed_device_with_its_own_evaluation_device() -> None:
    plan = RunPlan(kernels=[KernelSpec("a", samples=2), KernelSpec("b")], devices=Devices.parse("cpu,cuda"))
    plan.kernels = per_device(plan.kernels, plan.devices)
    assert [(k.path, k.device) for k in plan.kernels] == [("a", "cpu"), ("a", "cuda"), ("b", "cpu"), ("b", "cuda")]
    assert plan.kernels[1].samples == 2  # a manifest's own values follow the kernel onto every device
    assert [loop_options(plan, k).eval.device for k in plan.kernels] == ["cpu", "cuda", "cpu", "cuda"]
    assert [device_of(plan, k) for k in plan.kernels] == ["cpu", "cuda", "cpu", "cuda"]
    again = RunPlan.from_json(plan.to_json())  # what --resume reads
    assert again == plan and all(type(k.device) is Device for k in again.kernels)
    assert type(again.devices) is Devices and again.devices == plan.devices


def test_labels_name_the_device_only_in_a_run_on_several() -> None:
    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

    one = RunPlan(kernels=per_device([KernelSpec("a")], Devices.parse("cpu")))
    assert labels(one, [(one.kernels[0], Named("softmax"))]) == ["softmax"]  # type: ignore[list-item]
    two = RunPlan(kernels=per_device([KernelSpec("a")], Devices.parse("cpu,cuda")))
    problems = [(spec, Named("softmax")) for spec in two.kernels]
    assert labels(two, problems) == ["softmax (cpu)", "softmax (cuda)"]  # type: ignore[arg-type]


def test_a_plan_stored_before_device_lists_keeps_its_one_device() -> None:
    """A stopped run from before resumes on the device it named: its specs have no device of their own, and the
    rows migration 0005 filled hold that device too."""
    stored = RunPlan(kernels=[KernelSpec("a")], evaluation=EvalConfig(device=Device.CPU)).to_json()
    del stored["devices"]
    for spec in stored["kernels"]:
        del spec["device"]
    plan = RunPlan.from_json(stored)
    assert plan.devices == Devices((Device.CPU,)) and plan.kernels[0].device is None
    assert device_of(plan, plan.kernels[0]) == "cpu"
    assert RunPlan.from_json(FORMAT_1).devices == Devices((Device.CPU,))
