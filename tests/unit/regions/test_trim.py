"""A candidate partly overlapped by a selected region offers its free ops as a trimmed region of their own."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kernel_agent.prove.recipe import load_recipe
from kernel_agent.regions.capture import capture
from kernel_agent.regions.checks import check_folder
from kernel_agent.regions.cut import regions_of, select
from kernel_agent.regions.find import Instance, trimmed
from kernel_agent.regions.graph import categories, name
from kernel_agent.regions.outcome import RegionsPlan
from kernel_agent.regions.program import find_axes
from kernel_agent.regions.run import captured_values, run_regions

RECIPE = f"{Path(__file__).with_name('small_recipe.py')}:interaction"


def _captures() -> list:
    case = load_recipe(RECIPE, "small")
    return [capture(case.model, inputs, label, "auto") for label, inputs in case.inputs.items()]


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("trim") / "a"
    run_regions(RegionsPlan(RECIPE, out=out, time_shares=False))
    return out


def test_the_interaction_between_two_selected_mlps_becomes_a_trimmed_region(first: Path) -> None:
    data = json.loads((first / "regions.json").read_text())
    assert data["errors"] == []
    chain = next(r for r in data["regions"] if r["kind"] == "chain")
    assert chain["ops"] == ["relu", "unsqueeze", "cat", "flatten"] and not chain["emitted"]
    part = next(r for r in data["regions"] if r["kind"] == "trimmed")
    assert part["ops"] == ["unsqueeze", "cat", "flatten"] and part["emitted"] and part["binding"] == "B3"
    assert part["trimmed_from"] == f"{chain['slug']}_{chain['id']}"
    assert f"its free ops: {part['slug']}_{part['id']}" in chain["status"]
    check_folder(first / part["folder"], None)
    # `--check` re-derives the same cut, so it finds the trimmed region's captured values too
    found, why = captured_values(data)
    assert why is None and part["id"] in found


def test_with_the_trimmed_region_every_op_that_does_work_is_in_the_cut() -> None:
    caps = _captures()
    regions = select(regions_of(caps, "auto"), caps, find_axes(caps))
    covered = {i for r in regions for m in r.selected for i in m.programs[0].body}
    cats = categories(caps[0])
    assert {i for i, c in cats.items() if c in ("anchor", "fusible")} <= covered
    selected = [i for r in regions for m in r.selected for i in m.programs[0].body]
    assert len(selected) == len(set(selected))  # still a disjoint cut


def test_two_runs_give_byte_identical_folders_and_ids(first: Path, tmp_path: Path) -> None:
    run_regions(RegionsPlan(RECIPE, out=tmp_path, time_shares=False))

    def files(folder: Path) -> dict[str, bytes]:
        return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}

    assert files(first) == files(tmp_path)


def test_trimming_keeps_connected_parts_that_do_work_and_nothing_else() -> None:
    cap = _captures()[0]
    cats = categories(cap)
    ops = {name(op): op.index for op in cap.ops if not cap.ops[op.index].modules[-1].startswith("top")}
    chain = Instance("chain", "chain:#0", (ops["relu"], ops["unsqueeze"], ops["cat"], ops["flatten"]), "", "")
    assert trimmed(chain, set(), cap, cats) == []  # nothing taken: the region itself, not a part of it
    assert trimmed(chain, set(chain.ops), cap, cats) == []  # everything taken: nothing left
    (part,) = trimmed(chain, {ops["relu"]}, cap, cats)
    assert part.ops == (ops["unsqueeze"], ops["cat"], ops["flatten"]) and part.key == "chain:#0/free0"
    # taking the cat leaves `relu, unsqueeze` (work) and `flatten` (a view alone: no part)
    (left,) = trimmed(chain, {ops["cat"]}, cap, cats)
    assert left.ops == (ops["relu"], ops["unsqueeze"])


def test_coverage_is_the_share_of_the_selected_ops_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every op of this model is in the cut, so the selected ops hold the whole forward in every round: the
    coverage is 1 exactly, where a sum of per-region medians (each from its own rounds) falls short of it."""
    import kernel_agent.measure.contention as contention
    from kernel_agent.measure.ceilings import Ceilings

    monkeypatch.setattr(contention, "CONTENTION_LIMIT", 1e9)  # a reading whatever the load: the ratio is the test
    given = Ceilings("cpu-test", "cpu", memory_gbps=10.0, gflops={"float32": 50.0})
    run_regions(RegionsPlan(RECIPE, out=tmp_path, rounds=5, ceilings=given))
    data = json.loads((tmp_path / "regions.json").read_text())
    assert set(data["coverage"]) == {"b4", "b7"}
    for label, f in data["coverage"].items():
        assert f == pytest.approx(1.0) and data["coverage_interval"][label] == pytest.approx([1.0, 1.0])
    assert "the selected set covers 100.0% [100.0, 100.0] of the forward" in (tmp_path / "regions.md").read_text()
    for label in data["coverage"]:  # the whole forward is in the cut: nothing left bounds the model at infinity
        assert data["bound"][label]["infinity"] is None and data["bound"][label]["2x"] == pytest.approx(2.0)


def test_the_compile_column_reads_a_speedup_with_its_interval_or_one_line_why_not(
    first: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    import kernel_agent.measure.contention as contention
    from kernel_agent.regions.compiled import compile_speedup

    data = json.loads((first / "regions.json").read_text())
    assert all(r["compile"] == {} for r in data["regions"])  # only with --compile
    part = next(r for r in data["regions"] if r["kind"] == "trimmed")
    inputs = [torch.randn(4, 8), torch.randn(4, 2, 8)]
    monkeypatch.setattr(contention, "CONTENTION_LIMIT", 1e9)  # a reading whatever the load
    reading = compile_speedup(first / part["folder"], inputs, 5)
    assert reading.reason is None and reading.speedup is not None and reading.speedup > 0
    assert reading.low is not None and reading.high is not None
    assert reading.low <= reading.speedup <= reading.high

    def no_compiler(*_a: object, **_k: object) -> object:  # stands in for a machine without a C++ compiler
        raise RuntimeError("InductorError: no working C++ compiler found\n(details)")

    monkeypatch.setattr(torch, "compile", no_compiler)
    failed = compile_speedup(first / part["folder"], inputs, 5)
    assert (
        failed.speedup is None and failed.reason == "torch.compile failed: InductorError: no working C++ compiler found"
    )


def test_a_fast_forward_is_replayed_until_the_busy_rule_has_a_window_to_judge() -> None:
    """20 rounds of this sub-millisecond forward last a few of /proc/stat's 10 ms ticks, where one stray tick read
    as a busy machine (the DLRM's shares were refused over a "0.0 s" window): rounds last MIN_WINDOW_S together."""
    from kernel_agent.regions import rank

    case = load_recipe(RECIPE, "small")
    label, inputs = next(iter(case.inputs.items()))
    cap = capture(case.model.eval(), inputs, label, "auto")
    started = time.perf_counter()
    timing = rank.time_capture(cap, case.model, inputs, 3)
    assert time.perf_counter() - started >= rank.MIN_WINDOW_S / 2  # sized from one warm round: near, not exact
    assert len(timing.per_op) == 3
