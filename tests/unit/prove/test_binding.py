"""A module binding swapped into a real module: guards that hold swap it, a guard that misses keeps the module's
own forward with the reason, and a call with other dtypes runs the module's own forward, counted."""

from __future__ import annotations

import torch

from kernel_agent.prove.binding import bind
from kernel_agent.prove.recipe import Binding


class Scale(torch.nn.Module):
    def __init__(self, eps: float) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((4,), 2.0))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight + self.eps


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = Scale(0.5), Scale(0.25)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))


def kernel(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w + 0.5 + 100.0  # tells the swapped path apart


BINDING = Binding(
    "scale_abc",
    "abc",
    ("arg:0", "param:weight"),
    ("float32", "float32"),
    1,
    "tensor",
    (("a", "Scale", (("eps", 0.5),)), ("b", "Scale", (("eps", 0.5),))),
)


def test_instances_whose_guards_hold_run_the_kernel_and_the_others_say_why() -> None:
    model = Model()
    done = bind(model, BINDING, kernel)
    assert done.swapped == ["a"] and done.refused == {"b": "eps is 0.25, captured as 0.5"}
    x = torch.ones(4)
    assert torch.equal(model.a(x), kernel(x, model.a.weight))
    assert torch.equal(model.b(x), x * 2.0 + 0.25)  # its own forward


def test_a_call_in_another_dtype_runs_the_modules_own_forward_and_is_counted() -> None:
    model = Model()
    done = bind(model, BINDING, kernel)
    x = torch.ones(4, dtype=torch.float64)
    assert torch.equal(model.a(x), x * model.a.weight + 0.5)
    assert done.misses_by_reason() == {"input 0 is float64, the kernel was verified on float32": 1}
    done.reset()
    assert done.misses_by_reason() == {}
