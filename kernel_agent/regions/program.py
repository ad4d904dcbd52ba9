"""An instance as a self-contained program: its external inputs, the setup ops that recompute some of them from
the shape (a causal mask, rotary tables), its ops with local names, and its outputs; and the shape axes that
vary between shape labels, learned by comparing the same instance's programs across labels.

Why two captures: a static capture says a view reshapes to `[2, 16, -1, 16]`, not which 16 is the sequence
and which the head size. The same place in a second label's capture (`[3, 33, -1, 16]`) tells the var axes
apart from the constants; every int a program holds is then either a constant or `coef * product of axes`.
An int that neither explains keeps the region from being emitted, with that reason.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import torch

from kernel_agent.regions.find import Instance
from kernel_agent.regions.graph import name
from kernel_agent.regions.records import Capture, Ref

Expr = tuple[int, tuple[int, ...]]  # coef * product of axes (no axes: a constant)


@dataclass
class Program:
    """One instance in one capture: `prelude` (setup ops feeding it, recomputed in make_inputs), `body`, the
    body's external `inputs` in order of first read, the prelude's `roots` (buffers and constants it reads),
    and `outputs` (values used after the instance, aliases of its inputs left out)."""

    cap: Capture
    instance: Instance
    prelude: list[int]
    body: list[int]
    inputs: list[int]
    roots: list[int]
    outputs: list[int]
    names: dict[int, str] = field(default_factory=dict)

    def skeleton_and_ints(self) -> tuple[str, list[int]]:
        """A text that two labels' programs share iff they are the same program up to ints, and those ints."""
        ints: list[int] = []

        def enc(item: Any) -> Any:
            if isinstance(item, Ref):
                return ["ref", self.names[item.value]]
            if isinstance(item, bool) or item is None or isinstance(item, str):
                return item
            if isinstance(item, int):
                ints.append(item)
                return ["int"]
            if isinstance(item, float):
                return ["float", repr(item)]
            if isinstance(item, (list, tuple)):
                return [enc(x) for x in item]
            if isinstance(item, dict):
                return {k: enc(v) for k, v in sorted(item.items())}
            return ["lit", literal_key(item)]

        ops = []
        for i in self.prelude + self.body:
            op = self.cap.ops[i]
            outs = [self.names.get(o) if o is not None else None for o in op.outputs]
            ops.append([op.target, enc(op.args), enc(op.kwargs), outs])
        heads = []
        for v in self.inputs + self.roots:
            val = self.cap.values[v]
            heads.append([self.names[v], val.dtype, [enc(d) for d in val.shape]])
        tails = [
            [self.names[v], self.cap.values[v].dtype, [enc(d) for d in self.cap.values[v].shape]] for v in self.outputs
        ]
        return json.dumps([heads, ops, tails], sort_keys=True), ints


def literal_key(item: Any) -> str:
    if isinstance(item, torch.dtype):
        return f"dtype:{str(item).removeprefix('torch.')}"
    if isinstance(item, torch.device):
        return "device"
    if isinstance(item, torch.layout):
        return f"layout:{str(item).removeprefix('torch.')}"
    if isinstance(item, torch.memory_format):
        return f"memory_format:{str(item).removeprefix('torch.')}"
    return f"other:{type(item).__name__}"


def build_program(cap: Capture, instance: Instance, cats: dict[int, str]) -> Program:
    members = set(instance.ops)
    produced = {o: i for i in members for o in cap.ops[i].outputs if o is not None}
    body = sorted(members)
    inputs: list[int] = []
    for i in body:
        for v in cap.ops[i].reads():
            if v not in produced and v not in inputs:
                inputs.append(v)
    # setup values among the inputs: recompute them from their setup ops
    prelude: set[int] = set()
    todo = [cap.values[v].producer for v in inputs if cap.values[v].producer is not None]
    todo = [p for p in todo if cats.get(p) == "setup"]
    while todo:
        p = todo.pop()
        if p in prelude:
            continue
        prelude.add(p)
        for v in cap.ops[p].reads():
            q = cap.values[v].producer
            if q is not None and cats.get(q) in ("setup", "param-view"):
                todo.append(q)
    prelude_made = {o for i in prelude for o in cap.ops[i].outputs if o is not None}
    roots: list[int] = []
    for i in sorted(prelude):
        for v in cap.ops[i].reads():
            if v not in prelude_made and v not in roots:
                roots.append(v)
    outside = [op for op in cap.ops if op.index not in members]
    read_outside = {v for op in outside for v in op.reads()} | set(cap.outputs)
    outputs = []
    for i in body:
        for o in cap.ops[i].outputs:
            if o is not None and o in read_outside and not _aliases_input(o, cap, inputs):
                outputs.append(o)
    prog = Program(cap, instance, sorted(prelude), body, inputs, roots, outputs)
    for k, v in enumerate(inputs):
        prog.names[v] = f"in{k}"
    for k, v in enumerate(roots):
        prog.names[v] = f"root{k}"
    n = 0
    for i in prog.prelude + prog.body:
        for o in cap.ops[i].outputs:
            if o is not None and o not in prog.names:
                prog.names[o] = f"v{n}"
                n += 1
    return prog


def _aliases_input(v: int, cap: Capture, inputs: list[int]) -> bool:
    seen = v
    while cap.values[seen].alias_of is not None:
        seen = cap.values[seen].alias_of
        if seen in inputs:
            return True
    return False


# ---- axes ---------------------------------------------------------------------------------------------------
def find_axes(caps: list[Capture]) -> list[tuple[int, ...]]:
    """The var axes: each distinct tuple (over labels) of a user-input dimension that is not the same in all and
    not a multiple or product of the others."""
    axes: list[tuple[int, ...]] = []
    for k in range(len(caps[0].user_inputs)):
        shapes = [c.values[c.user_inputs[k]].shape for c in caps if k < len(c.user_inputs)]
        if len(shapes) != len(caps) or len({len(s) for s in shapes}) != 1:
            continue
        for d in range(len(shapes[0])):
            t = tuple(s[d] for s in shapes)
            if len(set(t)) > 1 and t not in axes:
                axes.append(t)
    # a size that is a multiple or product of other axes (3 indices per bag: 3 * batch) is not an axis of its own
    for t in list(axes):
        others = [a for a in axes if a != t]
        derived = express(t, others)
        if derived is not None and derived[1]:
            axes.remove(t)
    return axes


def express(values: tuple[int, ...], axes: list[tuple[int, ...]]) -> Expr | None:
    """`values` (one per label) as coef * product of axes, a constant when equal; None when nothing fits."""
    if len(set(values)) == 1:
        return (values[0], ())
    if any(v <= 0 for v in values):
        return None
    for size in range(1, min(3, len(axes)) + 1):
        for combo in itertools.combinations(range(len(axes)), size):
            prods = [1] * len(values)
            for a in combo:
                prods = [p * axes[a][i] for i, p in enumerate(prods)]
            if values[0] % prods[0]:
                continue
            coef = values[0] // prods[0]
            if coef >= 1 and all(v == coef * p for v, p in zip(values, prods)):
                return (coef, combo)
    return None


def expr_text(e: Expr) -> str:
    coef, axes = e
    if not axes:
        return str(coef)
    parts = [f"A{a}" for a in axes]
    return "*".join(([str(coef)] if coef != 1 else []) + parts)


@dataclass
class Matched:
    """One instance matched across labels: its programs (one per label), every int as an expression, and why it
    cannot be a problem (None when it can)."""

    key: str
    programs: list[Program]
    ints: list[Expr]
    skeleton: str
    problem: str | None

    @property
    def axes_used(self) -> list[int]:
        return sorted({a for _, axes in self.ints for a in axes})


def match(programs: list[Program], axes: list[tuple[int, ...]]) -> Matched:
    texts = [p.skeleton_and_ints() for p in programs]
    key = programs[0].instance.key
    if len({t for t, _ in texts}) != 1:
        return Matched(key, programs, [], texts[0][0], "its ops differ between shape labels")
    exprs: list[Expr] = []
    for column in zip(*(ints for _, ints in texts)):
        e = express(tuple(column), axes)
        if e is None:
            return Matched(key, programs, [], texts[0][0], f"a size {list(column)} no var axis explains")
        exprs.append(e)
    return Matched(key, programs, exprs, texts[0][0], None)


def signature(m: Matched) -> str:
    """The region id: a hash of the op sequence with its arguments, dtypes and every size as an expression."""
    text = json.dumps([m.skeleton, [expr_text(e) for e in m.ints]])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def op_names(p: Program) -> list[str]:
    return [name(p.cap.ops[i]) for i in p.body]
