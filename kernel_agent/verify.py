"""Compare candidate outputs with the trusted references (THREATS.md section 3.3).

An output passes only if all of these hold against the float64 gold:
(a) elementwise |out - gold| <= atol + rtol * |gold|;
(b) error versus the same-dtype reference: max error <= 2 * base max error + slack,
    mean error <= 1.5 * base mean error + slack, where slack is 64 units of the
    dtype's rounding at the output's scale: room for honest reordering of sums,
    none for computing in a narrower type (catches precision downgrades);
(c) normwise ||out - gold|| / ||gold|| <= tau (catches near-zero outputs, where (a) is weak);
plus exact shape and dtype, and no NaN/Inf where the gold has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from kernel_agent.problem import as_outputs


@dataclass
class Tolerance:
    rtol: float
    atol: float
    norm: float


@dataclass
class Mismatch:
    """Why one output failed, with the first bad index and magnitudes for the author."""

    check: str
    output: int
    message: str
    index: list[int] | None = None
    got: float | None = None
    expected: float | None = None
    max_abs_error: float | None = None

    def line(self) -> str:
        return f"output {self.output}: {self.message}"


@dataclass
class Comparison:
    passed: bool
    mismatch: Mismatch | None = None
    max_abs_error: float = 0.0
    rel_norm_error: float = 0.0
    base_max_abs_error: float = 0.0
    details: list[dict[str, Any]] = field(default_factory=list)


def _first_index(mask: torch.Tensor) -> list[int]:
    flat = int(torch.nonzero(mask.reshape(-1))[0].item())
    index = []
    for size in reversed(mask.shape):
        index.append(flat % size)
        flat //= size
    return list(reversed(index))


def compare(outputs: Any, gold: tuple[torch.Tensor, ...], base: tuple[torch.Tensor, ...], tol: Tolerance) -> Comparison:
    """Check every element of every output; the first failure is reported precisely."""
    try:
        outs = as_outputs(outputs)
    except TypeError as exc:
        return Comparison(False, Mismatch("type", 0, str(exc)))
    if len(outs) != len(gold):
        return Comparison(False, Mismatch("count", 0, f"returned {len(outs)} output(s), expected {len(gold)}"))
    worst = Comparison(True)
    for i, (out, g, b) in enumerate(zip(outs, gold, base)):
        result = _compare_one(i, out, g, b, tol)
        worst.details.append({"output": i, "max_abs_error": result.max_abs_error, "rel_norm_error": result.rel_norm_error, "base_max_abs_error": result.base_max_abs_error})
        worst.max_abs_error = max(worst.max_abs_error, result.max_abs_error)
        worst.rel_norm_error = max(worst.rel_norm_error, result.rel_norm_error)
        worst.base_max_abs_error = max(worst.base_max_abs_error, result.base_max_abs_error)
        if not result.passed:
            worst.passed = False
            worst.mismatch = result.mismatch
            return worst
    return worst


def _compare_one(i: int, out: torch.Tensor, gold: torch.Tensor, base: torch.Tensor, tol: Tolerance) -> Comparison:
    if tuple(out.shape) != tuple(gold.shape):
        return Comparison(False, Mismatch("shape", i, f"shape {list(out.shape)}, expected {list(gold.shape)}"))
    if out.dtype != base.dtype:
        return Comparison(False, Mismatch("dtype", i, f"dtype {out.dtype}, expected {base.dtype}"))
    if out.numel() == 0:
        return Comparison(True)
    if not gold.is_floating_point():
        equal = torch.equal(out, gold.to(out.dtype))
        if equal:
            return Comparison(True)
        bad = out != gold.to(out.dtype)
        idx = _first_index(bad)
        return Comparison(False, Mismatch("exact", i, f"integer output differs at {idx}", idx, float(out[tuple(idx)]), float(gold[tuple(idx)])))
    o, g, b = out.double(), gold.double(), base.double()
    finite_gold = torch.isfinite(g)
    bad_nonfinite = ~torch.isfinite(o) & finite_gold
    if bool(bad_nonfinite.any()):
        idx = _first_index(bad_nonfinite)
        return Comparison(False, Mismatch("nan", i, f"NaN/Inf at {idx} where the reference is finite ({int(bad_nonfinite.sum())} element(s))", idx, float(o[tuple(idx)]), float(g[tuple(idx)])))
    nonfinite_gold = ~finite_gold
    if bool(nonfinite_gold.any()):
        same = (o[nonfinite_gold] == g[nonfinite_gold]) | (torch.isnan(o[nonfinite_gold]) & torch.isnan(g[nonfinite_gold]))
        if not bool(same.all()):
            return Comparison(False, Mismatch("nan", i, "non-finite reference values not reproduced"))
        o, g, b = o.masked_fill(nonfinite_gold, 0), g.masked_fill(nonfinite_gold, 0), b.masked_fill(~torch.isfinite(b), 0)
    err = (o - g).abs()
    base_err = (b - g).abs()
    max_err, mean_err = float(err.max()), float(err.mean())
    base_max, base_mean = float(base_err.max()), float(base_err.mean())
    gold_norm = float(torch.linalg.vector_norm(g))
    rel_norm = float(torch.linalg.vector_norm(o - g)) / gold_norm if gold_norm > 0 else (0.0 if max_err == 0 else float("inf"))
    result = Comparison(True, None, max_err, rel_norm, base_max)
    allowed = tol.atol + tol.rtol * g.abs()
    over = err > allowed
    if bool(over.any()):
        idx = _first_index(over)
        count = int(over.sum())
        result.passed = False
        got, expected = float(o[tuple(idx)]), float(g[tuple(idx)])
        message = (
            f"{count} of {err.numel()} elements differ beyond rtol={tol.rtol:g} atol={tol.atol:g}; "
            f"first at {idx}: got {got:.6g}, expected {expected:.6g}; max abs error {max_err:.3g}"
        )
        result.mismatch = Mismatch("allclose", i, message, idx, got, expected, max_err)
        return result
    eps = torch.finfo(out.dtype).eps
    max_slack, mean_slack = 64 * eps * float(g.abs().max()), 64 * eps * float(g.abs().mean())
    if max_err > 2 * base_max + max_slack or mean_err > 1.5 * base_mean + mean_slack:
        result.passed = False
        result.mismatch = Mismatch(
            "precision", i,
            f"error {max_err:.3g} (mean {mean_err:.3g}) is well above the same-dtype reference's {base_max:.3g} (mean {base_mean:.3g}): lower internal precision?",
            max_abs_error=max_err,
        )
        return result
    if rel_norm > tol.norm:
        result.passed = False
        result.mismatch = Mismatch("norm", i, f"relative norm error {rel_norm:.3g} exceeds {tol.norm:g}", max_abs_error=max_err)
    return result


def canary_outputs(gold: tuple[torch.Tensor, ...], base: tuple[torch.Tensor, ...], inputs: list[torch.Tensor]) -> dict[str, tuple[torch.Tensor, ...]]:
    """Cheater outputs every problem must reject: zeros, ones, the mean, passthrough, random."""
    generator = torch.Generator().manual_seed(1234)
    canaries: dict[str, tuple[torch.Tensor, ...]] = {
        "zeros": tuple(torch.zeros_like(b) for b in base),
        "ones": tuple(torch.ones_like(b) for b in base),
        "mean": tuple(torch.full_like(b, float(b.double().mean())) if b.is_floating_point() else b.clone() * 0 for b in base),
        "random": tuple(torch.randn(b.shape, generator=generator).to(b.dtype) for b in base),
    }
    if all(b.is_floating_point() for b in base):
        canaries["uninitialized"] = tuple(torch.full_like(b, 3.0e38 if b.dtype == torch.float32 else 6.0e4) for b in base)
    for j, inp in enumerate(inputs):
        if len(base) == 1 and tuple(inp.shape) == tuple(base[0].shape) and inp.dtype == base[0].dtype:
            canaries[f"input{j}"] = (inp.clone(),)
    return canaries
