"""Capture: export when it works, the dispatch trace when it does not (and the output says why)."""

from __future__ import annotations

import torch
from torch import nn

from kernel_agent.regions.capture import capture, check_against_eager
from kernel_agent.regions.graph import categories


class Branchy(nn.Module):
    """A branch on a tensor's value: torch.export cannot capture it at static shapes."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        if y.sum() > 0:
            return torch.relu(y) * 2
        return torch.sigmoid(y)


def test_a_data_dependent_branch_falls_back_to_the_trace_and_says_so() -> None:
    torch.manual_seed(0)
    model, x = Branchy().eval(), torch.randn(4, 8)
    cap = capture(model, (x,), "b4")
    assert cap.mode == "trace"
    assert cap.why.startswith("torch.export failed") and "dispatch trace" in cap.why
    assert check_against_eager(model, (x,), cap) is None
    cats = categories(cap)
    syncs = [op.target for op in cap.ops if cats[op.index] == "sync"]
    assert syncs == ["aten._local_scalar_dense.default"]  # the host sync is a boundary
    assert any("proj" in op.modules for op in cap.ops)  # the module stack is recorded


def test_export_records_ops_with_their_modules_and_equals_eager() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    x = torch.randn(3, 8)
    cap = capture(model, (x,), "b3")
    assert cap.mode == "export"
    assert [op.target for op in cap.ops] == ["aten.linear.default", "aten.relu.default", "aten.linear.default"]
    assert [op.modules[-1] for op in cap.ops] == ["0", "1", "2"]
    assert check_against_eager(model, (x,), cap) is None
    assert {cap.values[v].source for v in cap.ops[0].reads()} == {"input", "param"}


class AutocastOff(nn.Module):
    """An `autocast(enabled=False)` block, as transformers' rotary embedding has: on the H100 its export held a
    `wrap_with_autocast` submodule and `regions` ended in a KeyError traceback."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", enabled=False):
            y = (x * 2).sin()
        return y.relu()


def test_an_export_with_a_higher_order_op_falls_back_to_the_trace_and_says_so() -> None:
    x = torch.randn(4, 8)
    cap = capture(AutocastOff(), (x,), "b4")
    assert cap.mode == "trace" and "wrap_with_autocast" in cap.why, cap.why
    assert [op.target.split(".")[1] for op in cap.ops] == ["mul", "sin", "relu"], [op.target for op in cap.ops]
    assert check_against_eager(AutocastOff(), (x,), cap) is None
