"""Compare candidate outputs with the trusted references (THREATS.md section 3.3).

An output passes only if all of these hold against the float64 gold:
(a) elementwise |out - gold| <= atol + rtol * |gold|;
(b) error versus the same-dtype reference: max error <= 2 * base max error + slack,
    mean error <= 1.5 * base mean error + slack, where slack is 64 units of the
    dtype's rounding at the output's scale: room for honest reordering of sums,
    none for computing in a narrower type (catches precision downgrades);
(c) normwise ||out - gold|| / ||gold|| <= max(tau, 2 * the same-dtype reference's own normwise error)
    (catches near-zero outputs, where (a) is weak; an output of a few elements near zero is judged against
    what the reference itself could do there, as in (b));
plus exact shape and dtype, and no NaN/Inf where the gold has none.

Where the same-dtype reference is itself NaN or Inf and the gold is finite (a naive float32 log-sum-exp that
overflows on some rows), the reference shows no error it could be held to there: those elements are judged
against the gold alone ((a), and the declared norm with no allowance from the reference), their count is
stated, and (b) and (c) take the reference's error from its finite elements only. An infinite reference error
never widens a bound.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

from kernel_agent.core.comparison import Comparison, Mismatch, Tolerance
from kernel_agent.problem.load import as_outputs


def _first_index(mask: torch.Tensor) -> list[int]:
    flat = int(torch.nonzero(mask.reshape(-1))[0].item())
    index = []
    for size in reversed(mask.shape):
        index.append(flat % size)
        flat //= size
    return list(reversed(index))


def compare(
    outputs: Any,
    gold: tuple[torch.Tensor, ...],
    base: tuple[torch.Tensor, ...],
    tol: Tolerance,
    exhaustive: bool = True,
    precision: bool = True,
) -> Comparison:
    """Check every element of every output; the first failure is reported precisely.

    Without `exhaustive` an elementwise failure ends the comparison at the chunk that shows it
    (the canaries: whether a cheater's output fails matters, not how badly). Without `precision`
    the error-versus-baseline rule is skipped (a comparison with the same-dtype reference alone)."""
    try:
        outs = as_outputs(outputs)
    except TypeError as exc:
        return Comparison(False, Mismatch("type", 0, str(exc)))
    if len(outs) != len(gold):
        return Comparison(False, Mismatch("count", 0, f"returned {len(outs)} output(s), expected {len(gold)}"))
    worst = Comparison(True)
    for i, (out, g, b) in enumerate(zip(outs, gold, base)):
        result = _compare_one(i, out, g, b, tol, exhaustive, precision)
        worst.details.append(
            {
                "output": i,
                "max_abs_error": result.max_abs_error,
                "rel_norm_error": result.rel_norm_error,
                "base_max_abs_error": result.base_max_abs_error,
                "reference_nonfinite": result.reference_nonfinite,
            }
        )
        worst.max_abs_error = max(worst.max_abs_error, result.max_abs_error)
        worst.rel_norm_error = max(worst.rel_norm_error, result.rel_norm_error)
        worst.base_max_abs_error = max(worst.base_max_abs_error, result.base_max_abs_error)
        worst.reference_nonfinite += result.reference_nonfinite
        if not result.passed:
            worst.passed = False
            worst.mismatch = result.mismatch
            return worst
    return worst


def _compare_one(
    i: int,
    out: torch.Tensor,
    gold: torch.Tensor,
    base: torch.Tensor,
    tol: Tolerance,
    exhaustive: bool = True,
    precision: bool = True,
) -> Comparison:
    if tuple(out.shape) != tuple(gold.shape):
        return Comparison(False, Mismatch("shape", i, f"shape {list(out.shape)}, expected {list(gold.shape)}"))
    if out.dtype != base.dtype:
        return Comparison(False, Mismatch("dtype", i, f"dtype {out.dtype}, expected {base.dtype}"))
    if out.numel() == 0:
        return Comparison(True)
    if not gold.is_floating_point():
        return _compare_exact(i, out, gold)
    stats = _Stats()
    o_all, g_all, b_all = out.reshape(-1), gold.reshape(-1), base.reshape(-1)
    for lo in range(0, o_all.numel(), CHUNK_ELEMENTS):  # float64 temporaries of one chunk, never of the whole output
        failure = stats.add(
            o_all[lo : lo + CHUNK_ELEMENTS], g_all[lo : lo + CHUNK_ELEMENTS], b_all[lo : lo + CHUNK_ELEMENTS], lo, tol
        )
        if failure is not None:
            return Comparison(False, _located(failure, i, out.shape))
        if stats.over_count and not exhaustive:
            break
    return _judged(i, out, stats, tol, precision)


def _compare_exact(i: int, out: torch.Tensor, gold: torch.Tensor) -> Comparison:
    """Integer and boolean outputs: equal or not."""
    if torch.equal(out, gold.to(out.dtype)):
        return Comparison(True)
    idx = _first_index(out != gold.to(out.dtype))
    where = tuple(idx)
    return Comparison(
        False, Mismatch("exact", i, f"integer output differs at {idx}", idx, float(out[where]), float(gold[where]))
    )


def _judged(i: int, out: torch.Tensor, stats: _Stats, tol: Tolerance, precision: bool) -> Comparison:
    """The verdict of one float output from its accumulated error statistics: elementwise tolerance first,
    then precision against the same-dtype reference, then the relative norm."""
    max_err = stats.max_err
    compared = stats.count - stats.base_lost  # elements where the same-dtype reference is finite
    gold_norm = stats.sq_gold**0.5
    rel_norm = stats.sq_err**0.5 / gold_norm if gold_norm > 0 else (0.0 if max_err == 0 else float("inf"))
    base_norm = stats.sq_base**0.5 / gold_norm if gold_norm > 0 else 0.0
    result = Comparison(True, None, max_err, rel_norm, stats.base_max, reference_nonfinite=stats.base_lost)
    if stats.over_count:
        assert stats.over_first is not None
        flat, got, expected = stats.over_first
        idx = _unravel(flat, out.shape)
        message = (
            f"{stats.over_count} of {out.numel()} elements differ beyond rtol={tol.rtol:g} atol={tol.atol:g}; "
            f"first at {idx}: got {got:.6g}, expected {expected:.6g}; max abs error {max_err:.3g}"
        )
        result.passed, result.mismatch = False, Mismatch("allclose", i, message, idx, got, expected, max_err)
        return result
    lost = (
        f"; {stats.base_lost} element(s) where the same-dtype reference is not finite judged against the "
        "float64 gold alone"
        if stats.base_lost
        else ""
    )
    eps = torch.finfo(out.dtype).eps
    max_slack, mean_slack = 64 * eps * stats.max_gold, 64 * eps * stats.sum_gold / stats.count
    if precision and compared:
        own_max, own_mean = stats.compared_max_err, stats.compared_sum_err / compared
        base_max, base_mean = stats.base_max, stats.sum_base / compared
        if own_max > 2 * base_max + max_slack or own_mean > 1.5 * base_mean + mean_slack:
            message = (
                f"error {own_max:.3g} (mean {own_mean:.3g}) is well above the same-dtype "
                f"reference's {base_max:.3g} (mean {base_mean:.3g}): lower internal precision?{lost}"
            )
            result.passed, result.mismatch = False, Mismatch("precision", i, message, max_abs_error=max_err)
            return result
    if rel_norm > max(tol.norm, 2 * base_norm):
        bound = f"{tol.norm:g}" if tol.norm >= 2 * base_norm else f"{2 * base_norm:.3g} (twice the reference's own)"
        message = f"relative norm error {rel_norm:.3g} exceeds {bound}{lost}"
        result.passed, result.mismatch = False, Mismatch("norm", i, message, max_abs_error=max_err)
    return result


CHUNK_ELEMENTS = (
    1 << 21
)  # float64 temporaries of 16 MB: under glibc's mmap threshold, so they are reused, not faulted in


def _unravel(flat: int, shape: torch.Size) -> list[int]:
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return list(reversed(index))


def _located(
    failure: tuple[str, str, int | None, float | None, float | None], output: int, shape: torch.Size
) -> Mismatch:
    check, message, flat, got, expected = failure
    idx = _unravel(flat, shape) if flat is not None else None
    return Mismatch(check, output, message.format(idx=idx), idx, got, expected)


class _Stats:
    """Running sums and maxima of one output's errors, chunk by chunk. `base_lost` counts the elements where
    the same-dtype reference is not finite and the gold is: the reference's error there is taken as zero
    (no allowance) and the candidate's is left out of the precision rule's `compared_*` statistics."""

    def __init__(self) -> None:
        self.count = 0
        self.max_err = self.sum_err = self.base_max = self.sum_base = self.sq_base = 0.0
        self.sq_err = self.sq_gold = self.max_gold = self.sum_gold = 0.0
        self.compared_max_err = self.compared_sum_err = 0.0
        self.base_lost = 0
        self.over_count = 0
        self.over_first: tuple[int, float, float] | None = None

    def add(
        self, out: torch.Tensor, gold: torch.Tensor, base: torch.Tensor, offset: int, tol: Tolerance
    ) -> tuple | None:
        g = gold.double()
        o = out.to(torch.float64, copy=True)
        b = base.to(torch.float64, copy=True)
        # A finite sum means every element is finite (one pass instead of a mask); else look closer.
        if not (math.isfinite(float(o.sum())) and math.isfinite(float(g.sum()))):
            finite_gold = torch.isfinite(g)
            bad_nonfinite = ~torch.isfinite(o) & finite_gold
            if bool(bad_nonfinite.any()):
                first = int(torch.nonzero(bad_nonfinite)[0].item())
                return (
                    "nan",
                    "NaN/Inf at {idx} where the reference is finite "
                    f"({int(bad_nonfinite.sum())} element(s) in this chunk)",
                    offset + first,
                    float(out[first]),
                    float(g[first]),
                )
            keep = ~finite_gold
            same = (o[keep] == g[keep]) | (torch.isnan(o[keep]) & torch.isnan(g[keep]))
            if not bool(same.all()):
                return ("nan", "non-finite reference values not reproduced", None, None, None)
            o, g, b = o.masked_fill(keep, 0), g.masked_fill(keep, 0), b.masked_fill(keep, 0)
        lost = None
        if not math.isfinite(float(b.sum())):  # the same-dtype reference overflowed where the gold did not
            lost = ~torch.isfinite(b)
            self.base_lost += int(lost.sum())
            b = torch.where(lost, g, b)
        err = o.sub_(g).abs_()  # o is a fresh float64 copy: reuse it
        base_err = b.sub_(g).abs_()
        allowed = g.abs()
        compared = err if lost is None else err.masked_fill(lost, 0)
        self.count += err.numel()
        self.max_err = max(self.max_err, float(err.max()))
        self.sum_err += float(err.sum())
        self.sq_err += float(torch.dot(err, err))
        self.compared_max_err = max(self.compared_max_err, float(compared.max()))
        self.compared_sum_err += float(compared.sum())
        self.base_max = max(self.base_max, float(base_err.max()))
        self.sum_base += float(base_err.sum())
        self.sq_base += float(torch.dot(base_err, base_err))
        self.sq_gold += float(torch.dot(g, g))
        self.max_gold = max(self.max_gold, float(allowed.max()))
        self.sum_gold += float(allowed.sum())
        count = int(torch.gt(err, allowed.mul_(tol.rtol).add_(tol.atol)).sum())
        if count and self.over_first is None:
            first = int(torch.nonzero(err > allowed)[0].item())
            self.over_first = (offset + first, float(out[first]), float(g[first]))
        self.over_count += count
        return None


def compare_same_dtype(outputs: Any, base: tuple[torch.Tensor, ...], tol: Tolerance) -> Comparison:
    """Against the same-dtype reference alone, at twice the tolerances and without the precision rule:
    for calls too large for a float64 gold (large check cases past the memory budget, large audits)."""
    return compare(outputs, base, base, Tolerance(2 * tol.rtol, 2 * tol.atol, 2 * tol.norm), precision=False)


def canary_outputs(
    gold: tuple[torch.Tensor, ...], base: tuple[torch.Tensor, ...], inputs: list[torch.Tensor]
) -> Iterator[tuple[str, tuple[torch.Tensor, ...]]]:
    """Cheater outputs every problem must reject: zeros, ones, the mean, passthrough, random.
    One at a time, so a large output is never held six times over."""
    generator = torch.Generator().manual_seed(1234)
    yield "zeros", tuple(torch.zeros_like(b) for b in base)
    yield "ones", tuple(torch.ones_like(b) for b in base)
    if all(b.numel() > 1 for b in base):  # the mean of a single value is the answer itself
        yield (
            "mean",
            tuple(
                torch.full_like(b, float(b.double().mean())) if b.is_floating_point() else b.clone() * 0 for b in base
            ),
        )
    yield "random", tuple(torch.randn(b.shape, generator=generator).to(b.dtype) for b in base)
    if all(b.is_floating_point() for b in base):
        yield "uninitialized", tuple(torch.full_like(b, 3.0e38 if b.dtype == torch.float32 else 6.0e4) for b in base)
    for j, inp in enumerate(inputs):
        if len(base) == 1 and tuple(inp.shape) == tuple(base[0].shape) and inp.dtype == base[0].dtype:
            yield f"input{j}", (inp,)
