"""A whole regions run on a small model (no timing): the cut, the problems, their checks, determinism."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernel_agent.regions.checks import CheckFailed, check_folder
from kernel_agent.regions.outcome import RegionsPlan
from kernel_agent.regions.run import run_regions

RECIPE = str(Path(__file__).with_name("small_recipe.py"))
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("regions") / "a"
    run_regions(RegionsPlan(f"{RECIPE}:build", out=out, time_shares=False))
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_cut_takes_each_mlp_the_crossing_add_and_norm_and_the_head(first: Path) -> None:
    data = json.loads((first / "regions.json").read_text())
    assert data["errors"] == []
    assert [c["mode"] for c in data["captures"]] == ["export", "export"]
    assert data["axes"] == {"A0": [2, 3], "A1": [8, 5]}
    emitted = {r["slug"]: r for r in data["regions"] if r["emitted"]}
    assert emitted["mlp"]["count"] == 2 and emitted["mlp"]["selected"] == 2
    # the residual add and the next norm, one region each: layer 0 -> layer 1 (which also returns the sum, the
    # next residual) and the last layer -> the final norm (whose sum nothing else reads): two signatures
    chains = [r for r in data["regions"] if r["kind"] == "chain" and r["emitted"]]
    assert len(chains) == 2 and all(c["ops"][0] == "add" and "rsqrt" in c["ops"] for c in chains)
    assert [c["instances"] for c in chains] == [[""], [""]]  # crossing modules: only the root holds both ops
    norm = next(r for r in data["regions"] if r["slug"] == "rmsnorm")
    assert norm["count"] == 3 and norm["selected"] == 1  # one signature, every instance; two are in the chain
    assert "the others overlap chain_" in norm["status"]
    assert "linear" in emitted and emitted["linear"]["instances"] == ["head"]
    for r in data["regions"]:
        assert r["status"], r  # every region says selected or why not


def test_every_emitted_problem_passes_its_checks_and_the_gold_is_float64(first: Path) -> None:
    data = json.loads((first / "regions.json").read_text())
    folders = [first / r["folder"] for r in data["regions"] if r["emitted"]]
    assert len(folders) == 5
    for folder in folders:
        check_folder(folder, None)
    norm = (first / next(r["folder"] for r in data["regions"] if r["slug"] == "rmsnorm") / "problem.py").read_text()
    assert "torch.ops.aten._to_copy.default" in norm or "to.dtype" in norm
    assert "float32" not in norm.split("def reference", 1)[1].split("def make_inputs")[0]  # the upcast is generic
    toml = (first / "kernels.toml").read_text()
    assert toml.count("[[kernel]]") == 5


def test_two_runs_give_byte_identical_folders_and_ids(first: Path, tmp_path: Path) -> None:
    again = tmp_path / "b"
    run_regions(RegionsPlan(f"{RECIPE}:build", out=again, time_shares=False))
    assert _files(first / "problems") == _files(again / "problems")
    ids = [r["id"] for r in json.loads((first / "regions.json").read_text())["regions"]]
    assert ids == [r["id"] for r in json.loads((again / "regions.json").read_text())["regions"]]


def test_a_tampered_reference_fails_the_check(first: Path, tmp_path: Path) -> None:
    data = json.loads((first / "regions.json").read_text())
    source = first / next(r["folder"] for r in data["regions"] if r["slug"] == "mlp")
    copy = tmp_path / "mlp"
    copy.mkdir()
    for f in source.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    kernel = (copy / "kernel.py").read_text().replace("return ", "return 1.0001 * ", 1)
    (copy / "kernel.py").write_text(kernel)
    with pytest.raises(CheckFailed, match="baseline differs"):
        check_folder(copy, None)


def test_a_recipe_that_fails_to_build_is_one_line_in_regions_json(tmp_path: Path) -> None:
    outcome = run_regions(RegionsPlan(f"{RECIPE}:broken", out=tmp_path, time_shares=False))
    data = json.loads((tmp_path / "regions.json").read_text())
    assert outcome.errors == data["errors"]
    assert len(data["errors"]) == 1 and "RuntimeError: no such checkpoint" in data["errors"][0]
    assert "\n" not in data["errors"][0] and data["regions"] == []


def test_embedding_bags_become_one_problem_with_valid_indices_and_offsets(tmp_path: Path) -> None:
    run_regions(RegionsPlan(f"{RECIPE}:bags", out=tmp_path, time_shares=False, index_dist="zipf:1.05"))
    data = json.loads((tmp_path / "regions.json").read_text())
    emitted = [r for r in data["regions"] if r["emitted"]]
    assert [r["kind"] for r in emitted] == ["horizontal"] and emitted[0]["ops"] == ["embedding_bag"] * 2 + ["stack"]
    folder = tmp_path / emitted[0]["folder"]
    text = (folder / "problem.py").read_text()
    assert "_zipf(50, (3*A0, ), 1.05" in text and "_zipf(7, (2*A0, ), 1.05" in text
    assert text.count("_offsets(") == 3  # the helper and one per table
    roles = [i["role"] for i in json.loads((folder / "region.json").read_text())["inputs"].values()]
    assert sorted(roles) == ["index", "index", "offsets", "offsets", "param", "param"]


def test_on_a_busy_machine_shares_are_refused_in_one_line_and_problems_still_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kernel_agent.measure.contention as contention
    from kernel_agent.measure.ceilings import Ceilings

    monkeypatch.setattr(contention, "CONTENTION_LIMIT", -1.0)  # any other process's time counts as too busy
    given = Ceilings("cpu-test", "cpu", memory_gbps=10.0, gflops={"float32": 50.0})  # as the CLI passes stored ones
    run_regions(RegionsPlan(f"{RECIPE}:build", out=tmp_path, rounds=3, ceilings=given))
    data = json.loads((tmp_path / "regions.json").read_text())
    refusals = [t["refused"] for t in data["timing"].values()]
    assert len(refusals) == 2 and all(r and r.startswith("the machine was too busy") for r in refusals)
    assert all("\n" not in r for r in refusals)
    assert data["coverage"] == {} and all(r["share"] == {} for r in data["regions"])
    assert sum(r["emitted"] for r in data["regions"]) == 5
    assert "shares refused: the machine was too busy" in (tmp_path / "regions.md").read_text()
    assert all(r["headroom"] for r in data["regions"])  # the roofline still counts: no timing verdict is made


def test_weights_are_written_only_when_asked(first: Path, tmp_path: Path) -> None:
    pytest.importorskip("safetensors")
    from safetensors.torch import load_file

    assert not list(first.rglob("weights.safetensors"))  # not by default
    run_regions(RegionsPlan(f"{RECIPE}:build", out=tmp_path, time_shares=False, weights=True))
    data = json.loads((tmp_path / "regions.json").read_text())
    folder = tmp_path / next(r["folder"] for r in data["regions"] if r["slug"] == "mlp")
    saved = load_file(str(folder / "weights.safetensors"))
    assert sorted(saved) == sorted(
        f"layers.{k}.mlp.{p}.{w}" for k in (0, 1) for p in ("up", "down") for w in ("weight", "bias")
    )


def test_regions_md_is_one_table_with_a_row_per_region(first: Path) -> None:
    lines = (first / "regions.md").read_text().splitlines()
    head = next(k for k, line in enumerate(lines) if line.startswith("| region |"))
    width = lines[head].count("|")
    rows = [line for line in lines[head + 2 :] if line.startswith("| ")]
    assert lines[head + 1].count("|") == width and all(r.count("|") == width for r in rows)
    assert len(rows) == len(json.loads((first / "regions.json").read_text())["regions"])


def test_the_trace_capture_gives_the_same_cut_as_the_export(first: Path, tmp_path: Path) -> None:
    """In a trace a Linear is view + addmm + view: the views at a chain's ends stay with their module."""
    run_regions(RegionsPlan(f"{RECIPE}:build", out=tmp_path, time_shares=False, capture="trace"))
    traced = json.loads((tmp_path / "regions.json").read_text())
    exported = json.loads((first / "regions.json").read_text())
    assert [c["mode"] for c in traced["captures"]] == ["trace", "trace"]

    def cut(data: dict) -> list[tuple]:
        return sorted((r["kind"], r["selected"], r["instances"][0]) for r in data["regions"] if r["emitted"])

    assert cut(traced) == cut(exported)


BLOCKED = """
import runpy, sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # any import of them now fails, as on the GPU machine
sys.argv = ["kernel-agent", *sys.argv[2:]]
runpy.run_module("kernel_agent", run_name="__main__")
"""


def _cli(blocked: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", BLOCKED, blocked, "regions", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with CUDA accepts --device cuda")
def test_device_cuda_is_refused_in_one_line_without_cuda(tmp_path: Path) -> None:
    proc = _cli("none", f"{RECIPE}:build", "--device", "cuda", "--out", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        "error: --device cuda: no CUDA device here (torch.cuda.is_available() is False); use --device cpu"
    )
    assert not (tmp_path / "regions.json").exists()


def test_regions_runs_without_database_llm_or_transformers_packages(tmp_path: Path) -> None:
    """The GPU machine lacks sqlalchemy, alembic and openai, and may lack transformers: the DLRM recipe still
    runs (ceilings measured, not stored), and the Llama recipe fails in one line."""
    no_db = "sqlalchemy,alembic,openai,transformers"
    proc = _cli(no_db, "examples/models/dlrm.py:build", "--size", "tiny", "--rounds", "3", "--out", str(tmp_path / "d"))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "sqlalchemy is not installed: not stored" in proc.stderr
    assert len(list((tmp_path / "d" / "problems").iterdir())) == 5
    proc = _cli(no_db, "examples/models/tiny_llama.py:build", "--size", "tiny", "--out", str(tmp_path / "l"))
    data = json.loads((tmp_path / "l" / "regions.json").read_text())
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(data["errors"]) == 1 and "transformers" in data["errors"][0] and "\n" not in data["errors"][0]
