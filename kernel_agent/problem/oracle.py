"""Trusted-side inputs and reference outputs.

Inputs are drawn here from secret seeds (never sent to the worker: it gets
tensors, not seeds). Reference outputs are computed here too, in a process that
never imports candidate code: a float64 "gold" and the same-dtype reference
("base") used by the error-versus-baseline rule.

Besides the distributions a problem declares, every check shape gets the hard draws (`HARD_DRAWS`): the
problem's own inputs moved to where formulas break that moderate inputs never show (an unshifted softmax or
log-sum-exp overflowing exp, a variance taken as E[x^2] - E[x]^2 cancelling). A problem whose own draws are
moderate would otherwise pass such a kernel as exact.
"""

from __future__ import annotations

import copy
import math
import secrets
from dataclasses import dataclass
from typing import Any

import torch

from kernel_agent.problem.load import Problem, Shape, as_outputs, seeded_generator, torch_dtype

# The hard draws, each named in the check's label with what it does to the problem's own inputs.
HARD_DRAWS = {
    "large": "scaled to the edge of exp's range for the dtype",
    "offset": "shifted far from zero against their spread",
}
LARGE_PAST_EXP = 1.15  # "large" puts the largest |x| at this times log(dtype max): exp(x) overflows there


@dataclass
class CaseSpec:
    """One correctness case: what to draw, never the drawn values' seed in public."""

    shape: Shape
    dtype: str
    distribution: str
    seed: int

    @property
    def hard(self) -> bool:
        return self.distribution in HARD_DRAWS

    def label(self) -> str:
        what = f" ({HARD_DRAWS[self.distribution]})" if self.hard else ""
        return f"shape={list(self.shape)} dtype={self.dtype} inputs={self.distribution}{what}"


def fresh_seed() -> int:
    return secrets.randbits(62)


def check_plan(problem: Problem, seeds_per_shape: int = 5, bench_seeds: int = 2) -> list[CaseSpec]:
    """Every check shape with `seeds_per_shape` fresh seeds and one case of each hard draw, benchmark shapes
    with fewer seeds (they are not check shapes: their size, not their numerics, is what they check).

    Distributions alternate so each shape sees every declared distribution.
    """
    plan: list[CaseSpec] = []
    dists = problem.distributions
    for dtype in problem.dtypes:
        for shape in problem.all_check_shapes():
            benchmark_only = shape in problem.shapes and shape not in problem.check_shapes and problem.check_shapes
            count = bench_seeds if benchmark_only else seeds_per_shape
            count = max(count, len(dists))
            for index in range(count):
                plan.append(CaseSpec(shape, dtype, dists[index % len(dists)], fresh_seed()))
            if not benchmark_only:
                plan.extend(CaseSpec(shape, dtype, hard, fresh_seed()) for hard in HARD_DRAWS)
    return plan


class CaseMaker:
    """Draws inputs and computes references for one problem on one device."""

    def __init__(self, problem: Problem, device: str) -> None:
        self.problem = problem
        self.device = device
        self.module = problem.module
        self.model: torch.nn.Module | None = None
        self.gold_model: torch.nn.Module | None = None
        self.init_args: list[Any] = []
        self.meta_model: torch.nn.Module | None = None
        if problem.kind == "kernelbench":
            self._build_models()

    # ---- KernelBench weights -------------------------------------------------
    def _build_models(self) -> None:
        module = self.module
        torch.manual_seed(fresh_seed())
        self.init_args = list(module.get_init_inputs())
        model = module.Model(*self.init_args)
        randomize_parameters(model, seeded_generator(fresh_seed()))
        self.model = model.to(self.device).eval()
        self.gold_model = copy.deepcopy(model).to(self.device).double().eval()

    def state(self) -> tuple[list[str], list[torch.Tensor]]:
        assert self.model is not None
        state = self.model.state_dict()
        return list(state), [t.detach().cpu() for t in state.values()]

    # ---- inputs ---------------------------------------------------------------
    def inputs(self, shape: Shape, dtype: str, distribution: str, seed: int, where: str = "cpu") -> list[torch.Tensor]:
        """One case's inputs from a secret seed; `where="cuda"` draws them on the device (the device data path's
        timed calls, DESIGN.md section 18: no host round trip per call)."""
        generator = seeded_generator(seed, where)
        if self.problem.kind == "kernelbench":
            torch.manual_seed(seed)
            drawn = [t.to(where) for t in self.module.get_inputs()]
        else:
            drawn = list(self.module.make_inputs(shape, torch_dtype(dtype), where, generator))
        if distribution in HARD_DRAWS:
            rtol = self.problem.tolerances.get(dtype, (1e-4, 1e-4))[0]
            drawn = [hardened(t, distribution, rtol) for t in drawn]
        elif distribution == "uniform":
            drawn = [
                torch.rand(t.shape, generator=generator, dtype=t.dtype, device=where) if t.is_floating_point() else t
                for t in drawn
            ]
        return [t.contiguous() for t in drawn]

    # ---- references -----------------------------------------------------------
    def reference_meta(self, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The reference's outputs on the meta device: their shapes and dtypes, at no cost."""
        metas = [t.to("meta") for t in inputs]
        with torch.no_grad():
            if self.problem.kind == "kernelbench":
                if self.meta_model is None:
                    with torch.device("meta"):
                        self.meta_model = self.module.Model(*self.init_args)
                return as_outputs(self.meta_model(*metas))
            return as_outputs(self.module.reference(*metas))

    def reference_same_dtype(self, inputs: list[torch.Tensor], where: str = "cpu") -> tuple[torch.Tensor, ...]:
        """The reference in the inputs' own dtype only (no float64 gold), on CPU (or `where`)."""
        with torch.no_grad():
            on_device = [t.to(self.device) for t in inputs]
            model = self.model if self.problem.kind == "kernelbench" else self.module.reference
            assert model is not None
            return tuple(t.to(where) for t in as_outputs(model(*on_device)))

    def reference(
        self, inputs: list[torch.Tensor], gold: bool = True, where: str = "cpu"
    ) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
        """(gold in float64, base in the inputs' dtype), both on CPU; (base, base) when `gold` is False
        (a case whose float64 copies would not fit the memory budget). `where="cuda"` keeps both on the device
        (the device data path compares there).

        The float64 copies of the inputs live only while the gold is computed, so one case never
        holds more than its inputs, their float64 copies and the two references at once."""
        if not gold:
            base = self.reference_same_dtype(inputs, where)
            return base, base
        with torch.no_grad():
            on_device = [t.to(self.device) for t in inputs]
            doubles = [t.double() if t.is_floating_point() else t for t in on_device]
            if self.problem.kind == "kernelbench":
                assert self.model is not None and self.gold_model is not None
                gold_out = tuple(t.to(where) for t in as_outputs(self.gold_model(*doubles)))
                del doubles
                base_out = as_outputs(self.model(*on_device))
            else:
                gold_out = tuple(t.to(where) for t in as_outputs(self.module.reference(*doubles)))
                del doubles
                base_out = as_outputs(self.module.reference(*on_device))
        return gold_out, tuple(t.to(where) for t in base_out)


def hardened(t: torch.Tensor, draw: str, rtol: float) -> torch.Tensor:
    """One input moved into a hard range. Integer tensors and masks (two values or fewer) keep their meaning.

    "large": scaled so its largest |x| is LARGE_PAST_EXP x log(dtype max) (about 102 in float32, 12.8 in
    float16): exp of it overflows, so a softmax or log-sum-exp without its max shift, or a tanh through exp,
    gives inf or NaN where the float64 gold is finite. "offset": shifted by (rtol / eps)^(3/4) times its spread
    (about 150 in float32): a variance as E[x^2] - E[x]^2 loses (offset / spread)^2 x eps, past rtol, while
    a two-pass or Welford form, and the reference, lose offset / spread x eps, well inside it.
    """
    if not t.is_floating_point() or t.numel() == 0 or (t.numel() > 2 and torch.unique(t).numel() <= 2):
        return t
    wide = t.double()
    if draw == "large":
        peak = float(wide.abs().max())
        target = LARGE_PAST_EXP * math.log(torch.finfo(t.dtype).max)
        return (wide * (target / peak)).to(t.dtype) if peak > 0 else t
    spread = float(wide.std()) if t.numel() > 1 else 0.0
    spread = spread or float(wide.abs().max()) or 1.0
    eps = torch.finfo(t.dtype).eps
    return (wide + spread * (max(rtol, eps) / eps) ** 0.75).to(t.dtype)


def randomize_parameters(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Move every floating parameter off its initial value (a LayerNorm at 1/0 hides bugs)."""
    with torch.no_grad():
        for param in model.parameters():
            if not param.is_floating_point():
                continue
            spread = float(param.float().std()) if param.numel() > 1 else 0.0
            scale = spread if spread > 1e-3 else 0.1
            param.add_(torch.randn(param.shape, generator=generator, dtype=param.dtype) * scale)
