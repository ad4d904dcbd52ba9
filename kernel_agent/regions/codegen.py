"""The text of a region's problem: `reference` (= the baseline's body) from the captured ops, `make_inputs` by
input role, `shape_of`, and the axis lines both share.

Three rewrites keep the reference honest: a dtype literal equal to the model's compute dtype becomes the
inputs' dtype (else a `to(float32)` would silently downcast the float64 gold); a device literal becomes the
inputs' device; every size is the expression over the var axes that both captures agree on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from kernel_agent.regions.graph import EMBEDDINGS, name
from kernel_agent.regions.program import Expr, Matched, Program, expr_text
from kernel_agent.regions.records import Ref

SMALL_ROOT = 4096  # buffers up to this many elements (rotary frequencies) are written into make_inputs as is


class CodegenError(ValueError):
    """A region whose program cannot be written as a problem: one line."""


@dataclass
class Role:
    """How make_inputs draws one input: kind (param, activation, index, offsets, mask, integer, setup), the
    expression of each dim, its dtype, and what the kind needs (mean/std, rows, the input its count comes from)."""

    kind: str
    dims: list[Expr]
    dtype: str
    mean: float = 0.0
    std: float = 1.0
    rows: str = ""
    count: str = ""
    bags: str = ""
    last: bool = False
    source: str = ""


@dataclass
class Code:
    """The generated text: the function body shared by reference and kernel, make_inputs, shape_of, the roles."""

    signature: str
    body: str
    make_inputs: str
    shape_of: str
    roles: list[Role]
    axes: list[int]


def _num(x: float) -> str:
    return f"{x:.4g}"


class _Writer:
    def __init__(self, m: Matched, compute: str) -> None:
        self.m, self.p, self.compute = m, m.programs[0], compute
        self.exprs: Iterator[Expr] = iter(m.ints)
        self.heads: dict[int, list[Expr]] = {}
        cap = self.p.cap
        self.used = {v for i in self.p.prelude + self.p.body for v in cap.ops[i].reads()} | set(self.p.outputs)
        self.used |= set(self.p.inputs)

    def arg(self, item: Any) -> str:
        if isinstance(item, Ref):
            return self.p.names[item.value]
        if isinstance(item, bool) or item is None or isinstance(item, str):
            return repr(item)
        if isinstance(item, int):
            return expr_text(next(self.exprs))
        if isinstance(item, float):
            return repr(item) if item == item and abs(item) != float("inf") else f"float({str(item)!r})"
        if isinstance(item, list):
            return "[" + ", ".join(self.arg(x) for x in item) + "]"
        if isinstance(item, tuple):
            return "(" + "".join(self.arg(x) + ", " for x in item) + ")"
        if isinstance(item, torch.dtype):
            text = str(item).removeprefix("torch.")
            return "dtype" if text == self.compute else f"torch.{text}"
        if isinstance(item, torch.device):
            return "device"
        if isinstance(item, (torch.layout, torch.memory_format)):
            return str(item)
        raise CodegenError(f"an argument of type {type(item).__name__} the problem text cannot hold")

    def ops(self, indices: list[int]) -> list[str]:
        lines = []
        for i in indices:
            op = self.p.cap.ops[i]
            call = f"torch.ops.{op.target}("
            parts = [self.arg(a) for a in op.args]
            parts += [f"{k}={self.arg(v)}" for k, v in sorted(op.kwargs.items())]
            call += ", ".join(parts) + ")"
            named = [self.p.names.get(o) if o is not None else None for o in op.outputs]
            if not op.tuple_out:
                lines.append(f"{named[0]} = {call}" if named and named[0] else call)
            else:
                lines.append(f"_t{i} = {call}")
                used = [o in self.used for o in op.outputs]
                lines += [f"{n} = _t{i}[{k}]" for k, (n, u) in enumerate(zip(named, used)) if n and u]
        return lines


def generate(m: Matched, compute: str, index_dist: str = "uniform") -> Code:
    """The problem's text; `index_dist` uniform, or zipf:A (rank r drawn with weight 1 / (r + 1)^A)."""
    p: Program = m.programs[0]
    w = _Writer(m, compute)
    cap = p.cap
    prelude_lines = w.ops(p.prelude)  # the order the program's ints were read in: ops, then input sizes
    body_lines = w.ops(p.body)
    for v in p.inputs + p.roots:
        w.heads[v] = [next(w.exprs) for _ in cap.values[v].shape]
    axes = m.axes_used
    derive = _derive(p, w.heads, axes)
    roles = [_role(p, v, w.heads, compute) for v in p.inputs]
    first_float = next((p.names[v] for v in p.inputs if cap.values[v].dtype == compute), None)
    head = [
        f"dtype, device = {first_float}.dtype, {first_float}.device"
        if first_float
        else f"dtype, device = torch.{compute}, {p.names[p.inputs[0]]}.device"
    ]
    outs = [p.names[v] for v in p.outputs]
    if not outs:
        raise CodegenError("the region's values are not used after it (nothing to return)")
    ret = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    body = "\n".join("    " + line for line in [*head, *derive, *body_lines, f"return {ret}"])
    signature = ", ".join(p.names[v] for v in p.inputs)
    make = _make_inputs(p, roles, w.heads, prelude_lines, axes, compute, index_dist)
    shape_of = "\n".join(
        [
            "def shape_of(" + signature + "):",
            *["    " + d for d in derive],
            "    return (" + "".join(f"A{a}, " for a in axes) + ")" if axes else "    return (1,)",
        ]
    )
    return Code(signature, body, make, shape_of, roles, axes)


def _derive(p: Program, heads: dict[int, list[Expr]], axes: list[int]) -> list[str]:
    lines = []
    for a in axes:
        best = None
        for v in p.inputs:
            for d, (coef, combo) in enumerate(heads[v]):
                if combo == (a,) and (best is None or coef < best[2]):
                    best = (p.names[v], d, coef)
        if best is None:
            raise CodegenError(f"axis A{a} appears only in sizes the region's inputs do not carry")
        lines.append(f"A{a} = {best[0]}.shape[{best[1]}]" + (f" // {best[2]}" if best[2] != 1 else ""))
    return lines


def _role(p: Program, v: int, heads: dict[int, list[Expr]], compute: str) -> Role:
    cap, val = p.cap, p.cap.values[v]
    dims = heads[v]
    if val.producer is not None and val.producer in p.prelude:
        return Role("setup", dims, val.dtype)
    for i in p.body:
        op = cap.ops[i]
        if name(op) not in EMBEDDINGS or len(op.args) < 2 or not isinstance(op.args[0], Ref):
            continue
        if op.args[1] == Ref(v):
            weight = op.args[0].value
            rows = expr_text(heads[weight][0]) if weight in heads else str(cap.values[weight].shape[0])
            return Role("index", dims, val.dtype, rows=rows)
        if name(op) != "embedding" and len(op.args) > 2 and op.args[2] == Ref(v) and isinstance(op.args[1], Ref):
            last = len(op.args) > 7 and op.args[7] is True  # include_last_offset
            count = expr_text(heads[op.args[1].value][0])
            return Role("offsets", dims, val.dtype, count=count, bags=expr_text(dims[0]), last=last)
    tensor = cap.tensors[v]
    if val.dtype == "bool":
        return Role("mask", dims, val.dtype)
    if not tensor.is_floating_point():
        return Role("integer", dims, val.dtype, rows=str(int(tensor.max()) + 1 if tensor.numel() else 1))
    flat = tensor.detach().double().flatten()
    std = float(flat.std()) if flat.numel() > 1 else 0.0
    kind = "param" if val.source in ("param", "buffer") else "activation"
    return Role(kind, dims, val.dtype, mean=float(flat.mean()), std=std if std > 1e-6 else 1.0, source=val.name)


def _dims(dims: list[Expr]) -> str:
    return "(" + "".join(expr_text(d) + ", " for d in dims) + ")"


def _dt(dtype: str, compute: str) -> str:
    return "dtype" if dtype == compute else f"torch.{dtype}"


def _make_inputs(
    p: Program,
    roles: list[Role],
    heads: dict[int, list[Expr]],
    prelude: list[str],
    axes: list[int],
    compute: str,
    index_dist: str,
) -> str:
    lines = ["def make_inputs(shape, dtype, device, generator):"]
    lines.append("    " + ("".join(f"A{a}, " for a in axes) + "= shape" if axes else "del shape"))
    for v, role in zip(p.inputs, roles):
        n, dims, dt = p.names[v], _dims(role.dims), _dt(role.dtype, compute)
        if role.kind in ("param", "activation"):
            lines.append(
                f"    {n} = _normal({dims}, {_num(role.mean)}, {_num(role.std)}, {dt}, device, generator)"
                f"  # {role.kind}{': ' + role.source if role.source else ''}"
            )
        elif role.kind == "index" and index_dist.startswith("zipf:"):
            lines.append(
                f"    {n} = _zipf({role.rows}, {dims}, {float(index_dist[5:])!r}, device, generator)"
                "  # rows of its table, power law"
            )
        elif role.kind == "index":
            lines.append(
                f"    {n} = torch.randint(0, {role.rows}, {dims}, generator=generator, device=device)"
                f"  # rows of its table"
            )
        elif role.kind == "offsets":
            lines.append(
                f"    {n} = _offsets({role.count}, {role.bags}, {role.last}, device, generator)  # monotone, from 0"
            )
        elif role.kind == "mask":
            lines.append(f"    {n} = torch.rand({dims}, generator=generator, device=device) < 0.5")
        elif role.kind == "integer":
            lines.append(f"    {n} = torch.randint(0, {role.rows}, {dims}, generator=generator, device=device)")
    if prelude:
        lines.append("    # recomputed from the shape, as the model computes them (setup: masks, positions, tables)")
        for v in p.roots:
            lines.append("    " + _root(p, v, heads[v], compute))
        lines += ["    " + line for line in prelude]
    lines.append("    return " + "".join(p.names[v] + ", " for v in p.inputs).rstrip(" "))
    return "\n".join(lines)


def _root(p: Program, v: int, dims: list[Expr], compute: str) -> str:
    val, tensor = p.cap.values[v], p.cap.tensors[v]
    n = p.names[v]
    if val.source in ("buffer", "const") and tensor.numel() <= SMALL_ROOT:
        values = tensor.detach().flatten().tolist()
        return (
            f"{n} = torch.tensor({values!r}, dtype={_dt(val.dtype, compute)}, device=device)"
            f".reshape({_dims(dims)})  # {val.source} {val.name}"
        )
    flat = tensor.detach().double().flatten()
    std = float(flat.std()) if flat.numel() > 1 else 1.0
    mean, dt = _num(float(flat.mean())), _dt(val.dtype, compute)
    return f"{n} = _normal({_dims(dims)}, {mean}, {_num(std)}, {dt}, device, generator)"
