"""`scripts/gpu-check --dry-run`: the prepared GPU check runs here on the CPU with CPU counterparts of every
device step, so a lent GPU's few minutes are never lost to a shell, import or argument error in the script
(issue 35; the developers' guide). Every section must leave its rows in the one table."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

from conftest import ROOT


def test_the_gpu_check_runs_end_to_end_on_the_cpu(tmp_path) -> None:
    proc = subprocess.run(
        [str(ROOT / "scripts" / "gpu-check"), "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHON": sys.executable, "OUT": str(tmp_path), "KERNEL_AGENT_CONTENTION_LIMIT": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    table = proc.stdout
    for path in ("host", "device"):  # both data paths' controls and fixture plans
        assert f"| controls | softmax64_tiny A/A (1 of 1) | {path} |" in table, table
        assert f"| controls | softmax64_tiny 2x slower | {path} |" in table, table
        assert f"| fixtures | GPU fixtures (planned, no GPU) | {path} | 17 listed |" in table, table
    assert table.count("| examples | triton_softmax") == 2 and "| error |" not in table, table
    assert "| tune | tune + select report cpp_row_softmax | host | done |" in table, table
    assert "| kernelbench | kb_rowloop.py kb_rowloop_new.py | host | correct |" in table, table
    assert "| profiles | profile cpp_softmax | host | done |" in table, table
    assert "| regions | dlrm b16 | cpu | 41 found, 5 selected, 5 emitted |" in table, table
    assert "| regions | dlrm --check | cpu | 5 of 5 passed |" in table, table
    assert table.count("| regions | dlrm ") == 8 and "coverage" in table and "share b16 " in table, table
    if importlib.util.find_spec("transformers") is not None:  # else a skipped row says the DLRM ran alone
        assert "| regions | tiny_llama --check | cpu | 7 of 7 passed |" in table, table
    else:
        assert "| regions | tiny_llama | cpu | skipped |" in table, table
    assert "Nothing failed." in table, table
    assert (tmp_path / "gpu-check-verdicts.jsonl").read_text().count("\n") == 3  # 2 examples, 1 KernelBench
    assert "| selector |" in next(tmp_path.glob("gpu-tune-cpp_row_softmax.md")).read_text()
    bad = subprocess.run([str(ROOT / "scripts" / "gpu-check"), "--typo"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr
