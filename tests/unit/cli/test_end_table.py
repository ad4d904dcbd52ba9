"""The optimize end table at a terminal's default 80 columns (cli/end_table.py, issue 40)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from kernel_agent.cli import optimize_cmd
from kernel_agent.cli.end_table import speedup_cell
from kernel_agent.optimize.search_state import KernelResult, KernelStatus

# The README demo's kernels, with numbers as wide as they come (two-digit speedups, three-digit intervals).
DEMO = [
    ("cpp_adamw", KernelStatus.IMPROVED, 2.92, [1.85, 3.70], {"eager": 8.81, "compile": 0.74}),
    ("cpp_cross_entropy", KernelStatus.IMPROVED, 24.31, [10.07, 125.5], {"eager": 2.61, "compile": 0.71}),
    ("cpp_gelu_layernorm", KernelStatus.NO_GAIN, None, None, {}),
    ("torch_attention", KernelStatus.NEEDS_REVIEW, 1.30, [1.11, 1.53], {"eager": 1.30, "compile": 0.92}),
    ("triton_matmul_bias_relu", KernelStatus.NEEDS_GPU, None, None, {}),
    ("softmax_b", KernelStatus.BASELINE_FAILED, None, None, {}),
    ("softmax_c", KernelStatus.PROVIDER_FAILED, None, None, {}),
]


def results() -> list[KernelResult]:
    made = []
    for name, status, speedup, ci, versus in DEMO:
        references = {
            kind: {"speedup": speedup / value, "ci": [speedup / value * 0.9, speedup / value * 1.1], "kind": kind}
            for kind, value in versus.items()
        }
        made.append(
            KernelResult(
                name,
                status,
                baseline_ms=12.345,
                best_ms=4.2 if speedup else None,
                speedup=speedup,
                speedup_ci=ci,
                best_candidate=12345 if speedup else None,
                references=references,
            )
        )
    return made


def render(width: int, wide: bool = False, monkeypatch: pytest.MonkeyPatch | None = None) -> str:
    buffer = io.StringIO()
    assert monkeypatch is not None
    monkeypatch.setattr(optimize_cmd, "stdout", Console(file=buffer, width=width, markup=False, emoji=False))
    optimize_cmd.render_summary(7, results(), None, wide)
    return buffer.getvalue()


def test_every_number_and_status_is_whole_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    text = render(80, monkeypatch=monkeypatch)
    table = text.split("details:")[0]
    assert max(len(line) for line in table.splitlines()) <= 80
    assert "…" not in table
    for r in results():
        if r.speedup:
            assert speedup_cell(r.speedup, r.speedup_ci) in table  # e.g. '24.3x [10.1, 126]'
        for kind in ("eager", "compile"):
            relative = r.speedup_vs()[kind]
            assert relative.value is None or f"{relative.value:.2f}x" in table
        assert optimize_cmd.STATUS_LABELS[str(r.status)] in table
        assert r.name in table or len(r.name) > 20  # names fold only past the room left


def test_a_narrow_table_drops_the_least_needed_columns_and_wide_keeps_them(monkeypatch: pytest.MonkeyPatch) -> None:
    narrow = render(80, monkeypatch=monkeypatch)
    assert "12345" not in narrow and "12.345" not in narrow  # best candidate, then the ms columns went
    wide = render(80, wide=True, monkeypatch=monkeypatch)
    assert "12345" in wide and "12.345" in wide
    roomy = render(160, monkeypatch=monkeypatch)
    assert "12345" in roomy and "12.345" in roomy and "…" not in roomy


def test_a_table_of_short_cells_keeps_the_kernel_column(monkeypatch: pytest.MonkeyPatch) -> None:
    """Headers wider than every cell used to wrap, the table overflowed, and rich squeezed the kernel names out."""
    buffer = io.StringIO()
    monkeypatch.setattr(optimize_cmd, "stdout", Console(file=buffer, width=80, markup=False, emoji=False))
    results = [
        KernelResult("softmax_a", KernelStatus.NO_GAIN, baseline_ms=1.234),
        KernelResult("softmax_b", KernelStatus.ERROR, baseline_ms=1.3, reason="x"),
    ]
    optimize_cmd.render_summary(1, results, None, False)
    table = buffer.getvalue().split("details:")[0]
    assert "softmax_a" in table and "softmax_b" in table and "no gain" in table and "…" not in table
