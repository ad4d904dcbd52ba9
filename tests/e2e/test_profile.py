"""Work counts, ceilings, roofline floors and the profile shown to the LLM and the user."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
import typer
from conftest import shape_timing, timing_record
from typer.testing import CliRunner

from kernel_agent.core.timing_result import Summary, TimingResult
from kernel_agent.measure.ceilings import (
    Ceilings,
    ceilings_from_dict,
    ceilings_to_dict,
    fingerprint_key,
    measure_ceilings,
)
from kernel_agent.measure.op_breakdown import triton_compile_metadata
from kernel_agent.measure.profile import build_profile
from kernel_agent.measure.roofline import fraction_of_floor, is_faster_than_floor, roofline
from kernel_agent.measure.trusted_breakdown import profiler_breakdown
from kernel_agent.measure.work import work_counts
from kernel_agent.problem.load import load_problem
from kernel_agent.propose.base import ProposalContext
from kernel_agent.propose.prompts import render_messages

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# A machine with round numbers: 20 GB/s, 100 GFLOP/s float32 (ridge at 5 FLOP/byte).
TOY = Ceilings(
    fingerprint="toy",
    device_name="toy cpu",
    memory_gbps=20.0,
    gflops={"float32": 100.0},
    measured_at="2026-01-01T00:00:00+00:00",
)


def write_problem(folder: Path, body: str, shapes: str, reference_kernel: str) -> Path:
    folder.mkdir()
    header = 'import torch\nDEVICE = "cpu"\nDTYPES = ["float32"]\n'
    (folder / "problem.py").write_text(header + f"SHAPES = {shapes}\n" + body)
    (folder / "kernel.py").write_text(reference_kernel)
    return folder


MATMUL_BODY = """
def reference(a, b):
    return a @ b


def make_inputs(shape, dtype, device, generator):
    m, n, k = shape
    return (
        torch.randn(m, k, generator=generator, dtype=dtype, device=device),
        torch.randn(k, n, generator=generator, dtype=dtype, device=device),
    )
"""

SCALE_BODY = """
def reference(x):
    return x * 2.0 + 1.0


def make_inputs(shape, dtype, device, generator):
    return (torch.randn(*shape, generator=generator, dtype=dtype, device=device),)
"""


# --- work counts ---------------------------------------------------------------------


def test_matmul_counts_match_hand_computed_values() -> None:
    problem = load_problem(EXAMPLES / "cpp_matmul")
    for m, n, k in problem.shapes:
        counts = work_counts(problem, (m, n, k), "float32")
        assert counts.flops == 2 * m * n * k
        assert counts.bytes == (m * k + k * n + m * n) * 4
        assert counts.arithmetic_intensity == pytest.approx(2 * m * n * k / ((m * k + k * n + m * n) * 4))
        assert counts.flops_source == "declared"


def test_softmax_counts_match_hand_computed_values() -> None:
    problem = load_problem(EXAMPLES / "cpp_softmax")
    for rows, cols in problem.shapes:
        counts = work_counts(problem, (rows, cols), "float32")
        assert counts.bytes == 2 * rows * cols * 4
        assert counts.flops == 4 * rows * cols  # declared: max, subtract, exp, divide per element
        assert counts.flops_source == "declared"


def test_flop_counter_counts_an_undeclared_matmul(tmp_path: Path) -> None:
    folder = write_problem(tmp_path / "mm", MATMUL_BODY, "[(64, 48, 32)]", "def kernel(a, b):\n    return a @ b\n")
    counts = work_counts(load_problem(folder), (64, 48, 32), "float32")
    assert counts.flops_source == "flop_counter"
    assert counts.flops == 2 * 64 * 48 * 32
    assert counts.bytes_source == "io"
    assert counts.bytes == (64 * 32 + 32 * 48 + 64 * 48) * 4  # inputs once + output once


def test_uncountable_flops_are_unknown_not_zero(tmp_path: Path) -> None:
    folder = write_problem(tmp_path / "scale", SCALE_BODY, "[(128, 256)]", "def kernel(x):\n    return x * 2.0 + 1.0\n")
    counts = work_counts(load_problem(folder), (128, 256), "float32")
    assert counts.flops is None and counts.flops_source == "none" and counts.arithmetic_intensity is None
    assert counts.bytes == 2 * 128 * 256 * 4
    bf16 = work_counts(load_problem(folder), (128, 256), "bfloat16")
    assert bf16.bytes == 2 * 128 * 256 * 2


def test_kernelbench_counts_include_the_weights() -> None:
    problem = load_problem(EXAMPLES / "kernelbench" / "level1_layernorm_mlp.py")
    counts = work_counts(problem, problem.shapes[0], "float32")
    assert counts.flops_source == "flop_counter"
    assert counts.flops == 2 * 64 * 256 * 256  # the Linear; LayerNorm and GELU are not counted
    weights = (256 * 256 + 256) + 2 * 256
    assert counts.bytes == (64 * 256 + 64 * 256 + weights) * 4


# --- ceilings ------------------------------------------------------------------------------


def test_cpu_ceilings_are_positive_plausible_and_quick() -> None:
    began = time.perf_counter()
    ceilings = measure_ceilings("cpu")
    elapsed = time.perf_counter() - began
    assert elapsed < 6.0, f"ceilings took {elapsed:.1f} s"
    assert 0.5 < ceilings.memory_gbps < 500, ceilings
    assert 1 < ceilings.gflops["float32"] < 10_000, ceilings
    assert all(rate > 0 for rate in ceilings.gflops.values())
    assert ceilings.device == "cpu" and ceilings.measured_at
    assert ceilings.fingerprint == fingerprint_key("cpu")
    assert ceilings_from_dict(json.loads(json.dumps(ceilings_to_dict(ceilings)))) == ceilings


def test_fingerprint_key_and_strict_decoding() -> None:
    key = fingerprint_key("cpu", threads=3)
    assert torch.__version__ in key and "3 threads" in key
    assert fingerprint_key("cpu", threads=3) == key != fingerprint_key("cpu", threads=4)
    with pytest.raises(ValueError, match="unknown"):
        ceilings_from_dict({**ceilings_to_dict(TOY), "extra": 1})
    with pytest.raises(ValueError, match="memory_gbps"):
        ceilings_from_dict({**ceilings_to_dict(TOY), "memory_gbps": 0})


# --- roofline ----------------------------------------------------------------------------------


def test_large_matmul_is_compute_bound_and_softmax_memory_bound() -> None:
    matmul = load_problem(EXAMPLES / "cpp_matmul")
    line = roofline(work_counts(matmul, (2048, 2048, 2048), "float32"), TOY, "float32")
    assert line.bound == "compute"
    assert line.floor_ms == pytest.approx(2 * 2048**3 / 100e9 * 1e3)
    assert line.ridge_intensity == pytest.approx(5.0)

    softmax = load_problem(EXAMPLES / "cpp_softmax")
    line = roofline(work_counts(softmax, (1024, 1024), "float32"), TOY, "float32")
    assert line.bound == "memory"
    assert line.floor_ms == pytest.approx(2 * 1024 * 1024 * 4 / 20e9 * 1e3)


def test_unmeasured_dtype_uses_the_fastest_measured_rate() -> None:
    matmul = load_problem(EXAMPLES / "cpp_matmul")
    line = roofline(work_counts(matmul, (1024, 1024, 1024), "float32"), TOY, "float64")
    assert line.peak_dtype == "float32" and line.bound == "compute"


def test_a_narrow_dtype_may_use_a_wider_dtypes_faster_rate() -> None:
    cpu = Ceilings(fingerprint="cpu", device_name="cpu", memory_gbps=30.0, gflops={"float32": 180.0, "bfloat16": 1.35})
    assert cpu.peak_gflops("bfloat16") == (180.0, "float32")  # bfloat16 data through float32 FMAs
    assert cpu.peak_gflops("float32") == (180.0, "float32")
    gpu = Ceilings(
        fingerprint="gpu",
        device_name="gpu",
        memory_gbps=4000.0,
        gflops={"float32": 50_000.0, "float16": 700_000.0, "bfloat16": 700_000.0},
    )
    assert gpu.peak_gflops("float32") == (50_000.0, "float32")  # no TF32 or half precision for float32 data
    assert gpu.peak_gflops("bfloat16") == (700_000.0, "bfloat16")
    assert gpu.peak_gflops("float64")[0] == 700_000.0  # unmeasured and nothing wider: the optimistic stand-in


def test_fraction_of_floor_and_the_faster_than_floor_flag() -> None:
    assert fraction_of_floor(2.0, 0.5) == pytest.approx(0.25)
    assert fraction_of_floor(0.5, 0.5) == pytest.approx(1.0)
    assert fraction_of_floor(0.25, 0.5) == pytest.approx(2.0)  # faster than physics: suspicious
    assert fraction_of_floor(0.0, 0.5) is None and fraction_of_floor(1.0, None) is None
    assert is_faster_than_floor(0.4, 0.5)
    assert not is_faster_than_floor(0.46, 0.5)  # within the 0.9 slack
    assert not is_faster_than_floor(2.0, 0.5)
    assert not is_faster_than_floor(None, 0.5)


# --- the profile in the prompt ---------------------------------------------------------------------


def softmax_timing(baseline_ms: tuple[float, float]) -> TimingResult:
    return timing_record(
        1.0,
        (0.9, 1.1),
        baseline=Summary(3.2, 3.0, 3.5, 3.3, 40),
        candidate=Summary(3.1, 3.0, 3.4, 3.2, 40),
        per_shape=[
            shape_timing((1024, 1024), base_ms=baseline_ms[0], cand_ms=baseline_ms[0]),
            shape_timing((256, 4096), base_ms=baseline_ms[1], cand_ms=baseline_ms[1]),
        ],
    )


def test_build_profile_keys_and_values() -> None:
    problem = load_problem(EXAMPLES / "cpp_softmax")
    profile = build_profile(problem, softmax_timing((4.0, 2.0)), TOY)
    assert (
        profile["baseline_median_ms"] == 3.2 and profile["baseline_p20_ms"] == 3.0 and profile["baseline_p80_ms"] == 3.5
    )
    assert profile["bound"] == "memory"
    floor = 2 * 1024 * 1024 * 4 / 20e9 * 1e3
    assert profile["fraction_of_floor"] == pytest.approx(((floor / 4.0) * (floor / 2.0)) ** 0.5, rel=1e-2)
    shape = profile["shape 1024x1024 (float32)"]
    assert shape["flops"] == 4 * 1024 * 1024 and shape["bytes"] == 8 * 1024 * 1024 and shape["intensity"] == 0.5
    assert shape["floor_ms"] == pytest.approx(floor, rel=1e-3) and shape["bound"] == "memory"
    assert shape["median_ms"] == 4.0
    assert shape["achieved_gbps"] == pytest.approx(8 * 1024 * 1024 / 4e-3 / 1e9, rel=1e-3)
    assert shape["achieved_gflops"] == pytest.approx(4 * 1024 * 1024 / 4e-3 / 1e9, rel=1e-3)
    assert shape["fraction_of_floor"] == pytest.approx(floor / 4.0, rel=1e-2)
    assert profile["ceilings"]["memory_gbps"] == 20.0
    assert "warning" not in profile

    untimed = build_profile(problem, None, None)
    assert set(untimed) == {"shape 1024x1024 (float32)", "shape 256x4096 (float32)"}
    assert set(untimed["shape 256x4096 (float32)"]) == {"flops", "bytes", "intensity"}


def test_a_baseline_faster_than_the_floor_is_flagged() -> None:
    problem = load_problem(EXAMPLES / "cpp_softmax")
    profile = build_profile(problem, softmax_timing((0.01, 2.0)), TOY)
    assert "1024x1024" in profile["warning"] and "256x4096" not in profile["warning"]


def test_profile_renders_into_the_prompt() -> None:
    problem = load_problem(EXAMPLES / "cpp_softmax")
    profile = build_profile(problem, softmax_timing((4.0, 2.0)), TOY)
    context = ProposalContext(
        problem=problem,
        baseline_source=problem.baseline_source,
        parents=[],
        history=[],
        profile=profile,
        round=1,
        samples=1,
        device="cpu",
    )
    user = render_messages(context)[1]["content"]
    section = user.split("## Profile of the baseline", 1)[1].split("##", 1)[0]
    assert "baseline time: median 3.2 ms (p20 3, p80 3.5)" in section
    assert "memory-bound" in section and "fraction of the roofline floor" in section
    assert (
        "shape 1024x1024 (float32): {flops=4194304, bytes=8388608, intensity=0.5, floor_ms=0.4194, bound=memory"
        in section
    )
    assert "achieved_gbps=2.097" in section and "fraction_of_floor=0.105" in section
    assert "ceilings: {device=toy cpu, memory_gbps=20" in section
    assert all(not line.endswith("...") for line in section.splitlines())  # nothing cut at the line cap


# --- profiler and Triton metadata -------------------------------------------------------------------


def test_profiler_breakdown_of_a_trusted_baseline() -> None:
    problem = load_problem(EXAMPLES / "kernelbench" / "level1_layernorm_mlp.py")
    breakdown = profiler_breakdown(problem, problem.baseline_path, problem.shapes[0], "float32", "cpu", calls=3)
    names = [op["name"] for op in breakdown["top_ops"]]
    assert "aten::addmm" in names
    addmm = next(op for op in breakdown["top_ops"] if op["name"] == "aten::addmm")
    assert addmm["count"] == 3 and addmm["self_cpu_ms"] > 0
    assert (
        breakdown["torch_ops_per_call"] >= 3 and breakdown["launches_per_call"] == breakdown["torch_ops_per_call"]
    )  # linear, layer_norm, gelu
    assert breakdown["wall_ms_per_call"] > 0 and breakdown["trusted_only"] is True


def test_profiler_breakdown_sees_time_outside_torch_ops() -> None:
    problem = load_problem(EXAMPLES / "cpp_softmax")

    def python_loop(x):  # work the operator table cannot see
        began = time.perf_counter()
        while time.perf_counter() - began < 0.002:
            pass
        return torch.empty_like(x)

    breakdown = profiler_breakdown(problem, python_loop, (4, 8), "float32", "cpu", calls=2)
    assert breakdown["outside_ops_ms_per_call"] >= 1.5
    assert breakdown["launches_per_call"] == 1


def test_triton_metadata_is_empty_without_a_compiled_kernel() -> None:
    assert triton_compile_metadata(None) == {}
    if not torch.cuda.is_available():
        assert triton_compile_metadata(object()) == {}


# --- the CLI -----------------------------------------------------------------------------------------


def cli_app() -> typer.Typer:
    from kernel_agent.cli.profile_cmd import profile_command

    app = typer.Typer()
    app.command("profile")(profile_command)

    @app.callback()
    def root() -> None:
        """Throwaway app: the command is registered for real by kernel_agent.cli."""

    return app


def test_ceilings_are_stored_once_per_fingerprint_and_remeasured_on_request(tmp_path: Path) -> None:
    from kernel_agent.cli.profile_cmd import profile_ceilings

    db = str(tmp_path / "runs.db")
    first, origin = profile_ceilings(db, "cpu", 1, remeasure=False)
    assert origin == "measured now and stored" and first.fingerprint == fingerprint_key("cpu", threads=1)
    again, origin = profile_ceilings(db, "cpu", 1, remeasure=False)
    assert origin.startswith("stored, measured ") and again == first  # what optimize would use: the first measurement
    time.sleep(1.1)  # measured_at has one-second resolution
    fresh, origin = profile_ceilings(db, "cpu", 1, remeasure=True)
    assert origin == "measured now and stored" and fresh.measured_at > first.measured_at
    stored, _ = profile_ceilings(db, "cpu", 1, remeasure=False)
    assert stored == fresh  # replaced, not added
    import sqlite3

    with sqlite3.connect(tmp_path / "runs.db") as connection:
        assert connection.execute("select count(*) from device_ceilings").fetchone() == (1,)
    other, origin = profile_ceilings(db, "cpu", 2, remeasure=False)
    assert (
        origin == "measured now and stored" and other.fingerprint != first.fingerprint
    )  # another thread count, another machine


def test_profile_cli_ceilings_alone(tmp_path: Path) -> None:
    """`kernel-agent profile --device cpu --ceilings`: no problem needed; the second call reads what
    the first stored."""
    args = ["profile", "--device", "cpu", "--ceilings", "--threads", "1", "--db", str(tmp_path / "runs.db")]
    first = CliRunner().invoke(cli_app(), [*args, "--json"])
    assert first.exit_code == 0, first.output
    measured = json.loads(first.stdout)
    assert (
        measured["device"] == "cpu"
        and measured["ceilings_origin"] == "measured now and stored"
        and measured["ceilings"]["memory_gbps"] > 0
    )
    second = CliRunner().invoke(cli_app(), args)
    assert second.exit_code == 0 and "stored, measured" in second.stdout and "1 threads" in second.stdout
    assert f"memory {measured['ceilings']['memory_gbps']:.4g} GB/s" in second.stdout
    nothing = CliRunner().invoke(cli_app(), ["profile", "--no-ceilings", "--db", str(tmp_path / "runs.db")])
    assert nothing.exit_code == 2 and "give a PROBLEM" in nothing.output


@pytest.mark.slow
def test_profile_cli_json_on_cpp_softmax(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli_app(), ["profile", str(EXAMPLES / "cpp_softmax"), "--json", "--db", str(tmp_path / "runs.db")]
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    data = json.loads(lines[-1])
    assert data["device"] == "cpu"
    assert data["ceilings"]["memory_gbps"] > 0 and data["ceilings"]["gflops"]["float32"] > 0
    assert [row["shape"] for row in data["shapes"]] == [[1024, 1024], [256, 4096]]
    for row in data["shapes"]:
        assert (
            row["flops"] == 4 * row["shape"][0] * row["shape"][1]
            and row["bytes"] == 8 * row["shape"][0] * row["shape"][1]
        )
        assert row["floor_ms"] > 0 and row["bound"] in ("memory", "compute")
        assert row["baseline_median_ms"] > 0
        assert 0 < row["baseline_fraction_of_floor"] <= 1.0  # the naive baseline is nowhere near the floor
        assert not any(key.startswith("candidate_") for key in row)  # A/A: one set of numbers
    assert data["timing"]["role"] == "baseline" and data["timing"]["status"] in ("correct", "faster", "flagged")
    assert data["profile"]["fraction_of_floor"] > 0
    assert data["breakdown"]["outside_ops_ms_per_call"] > 0  # the ctypes kernel


@pytest.mark.slow
def test_profile_cli_candidate_breakdown_comes_from_its_sandbox(tmp_path: Path) -> None:
    from conftest import CANDIDATES, SOFTMAX

    result = CliRunner().invoke(
        cli_app(),
        [
            "profile",
            str(SOFTMAX),
            "--candidate",
            str(CANDIDATES / "faster.py"),
            "--json",
            "--db",
            str(tmp_path / "runs.db"),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads([line for line in result.stdout.splitlines() if line.strip()][-1])
    assert data["timing"]["role"] == "candidate" and data["timing"]["speedup"] > 1
    breakdown = data["breakdown"]
    assert breakdown["role"] == "candidate" and breakdown["reported_by"] == "the candidate's sandboxed process"
    assert "aten::_softmax" in [
        op["name"] for op in breakdown["top_ops"]
    ]  # the candidate's own operators, not the baseline's
    assert "aten::exp" not in [op["name"] for op in breakdown["top_ops"]]
    assert "aten::_softmax" in data["profile"]["top operators by self time"]
    assert data["profile"]["candidate_median_ms"] > 0 and data["profile"]["fraction_of_floor"] > 0
