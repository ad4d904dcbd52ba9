"""Verdicts through the real CLI and the real sandbox (issue: trusted evaluation)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CANDIDATES, SOFTMAX, eval_json, run_cli


def test_faster_candidate_is_faster(tmp_path: Path) -> None:
    verdict, proc = eval_json(SOFTMAX, CANDIDATES / "faster.py", tmp_path=tmp_path)
    assert verdict["status"] in ("faster", "flagged"), verdict["reason"]
    assert verdict["correct"] is True
    assert verdict["speedup_ci"][0] > 1.02
    assert proc.returncode == 0
    assert verdict["isolation"].startswith(("bwrap", "unshare", "process"))
    assert verdict["timing"]["audited_calls"] >= verdict["timing"]["rounds"]
    assert verdict["timing"]["fresh_inputs_every_call"] is True


def test_baseline_against_itself_is_correct_with_interval_around_one(tmp_path: Path) -> None:
    verdict, proc = eval_json(SOFTMAX, SOFTMAX / "kernel.py", tmp_path=tmp_path)
    assert verdict["status"] == "correct", verdict["reason"]
    low, high = verdict["speedup_ci"]
    assert low <= 1.0 <= high
    assert proc.returncode == 0


def test_doing_the_work_twice_measures_about_half(tmp_path: Path) -> None:
    verdict, _ = eval_json(SOFTMAX, CANDIDATES / "twice.py", tmp_path=tmp_path)
    assert verdict["status"] == "correct"
    assert 0.35 < verdict["speedup"] < 0.7, verdict["timing"]


@pytest.mark.parametrize(
    ("name", "status", "needle"),
    [
        ("wrong_values.py", "incorrect", "differ beyond"),
        ("wrong_dtype.py", "incorrect", "dtype torch.float64"),
        ("nan.py", "incorrect", "NaN/Inf"),
        ("alias.py", "incorrect", "shares memory with input"),
        ("mutate.py", "incorrect", "input 0 was modified"),
        ("syntax_error.py", "compile_error", "SyntaxError"),
        ("raises.py", "runtime_error", "boom from the candidate"),
        ("segfault.py", "crashed", "SIGSEGV"),
        ("exits.py", "crashed", "without answering"),
    ],
)
def test_bad_candidates_get_a_precise_verdict(tmp_path: Path, name: str, status: str, needle: str) -> None:
    verdict, proc = eval_json(SOFTMAX, CANDIDATES / name, tmp_path=tmp_path)
    assert verdict["status"] == status, verdict["reason"]
    assert needle in verdict["reason"]
    assert verdict["correct"] is False and verdict["speedup"] is None
    assert "\n" not in verdict["reason"]
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr


def test_infinite_loop_times_out_within_the_limit(tmp_path: Path) -> None:
    import time

    started = time.monotonic()
    verdict, proc = eval_json(SOFTMAX, CANDIDATES / "hangs.py", "--timeout", "6", tmp_path=tmp_path)
    assert verdict["status"] == "timeout"
    assert time.monotonic() - started < 6 + 20  # the limit plus interpreter start and references
    assert proc.returncode == 1
    assert sum(verdict["durations"].values()) >= 6  # the phase a timeout ended is counted whole, as stored


def test_what_the_candidate_prints_cannot_change_the_verdict(tmp_path: Path) -> None:
    verdict, _ = eval_json(SOFTMAX, CANDIDATES / "prints.py", tmp_path=tmp_path)
    assert verdict["status"] in ("faster", "flagged")
    assert verdict["speedup"] < 100
    assert '"status": "faster"' in verdict["candidate_output"]


def test_usage_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    missing = run_cli("eval", str(tmp_path / "nope"), str(CANDIDATES / "faster.py"))
    assert missing.returncode == 2
    assert "no such problem" in missing.stderr and "Traceback" not in missing.stderr
    bad_device = run_cli("eval", str(SOFTMAX), str(CANDIDATES / "faster.py"), "--device", "tpu")
    assert bad_device.returncode == 2
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "problem.py").write_text("SHAPES = [(4,)]\ndef reference(x): return x\n")
    (broken / "kernel.py").write_text("def kernel(x): return x\n")
    result = run_cli("eval", str(broken), str(CANDIDATES / "faster.py"))
    assert result.returncode == 2
    assert "make_inputs" in result.stderr


def test_human_output_names_status_and_speedup(tmp_path: Path) -> None:
    proc = run_cli("eval", str(SOFTMAX), str(CANDIDATES / "wrong_values.py"), "--sandbox", str(tmp_path / "sb"))
    assert proc.returncode == 1
    assert "incorrect" in proc.stdout and "reason:" in proc.stdout
