"""How a module region's winner goes back into the model (binding B1): which of the module's forward arguments
and which of its own parameters the kernel takes, in the problem's input order, and the module attributes the
captured ops baked in (an epsilon, a size), which become the guards each instance must hold to be swapped.

Why from an eager pass and not the capture: the capture knows each input's value, not which argument of the
module's forward carried it. One forward with hooks on the region's instances records the tensors each call was
given and returned; each program input is then found among them by identity of value (same shape, dtype and
bits), or among the instance's own parameters and buffers by path. Anything else (a value the module computes
from a global, an input two arguments could be) leaves the region without a binding, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from kernel_agent.prove.model_ab import outputs
from kernel_agent.regions.program import Program

GUARD_TYPES = (bool, int, float, str, type(None))


@dataclass
class Call:
    """What one module instance was given and returned in the eager pass, tensors flattened in order."""

    args: list[torch.Tensor]
    outputs: list[torch.Tensor]
    output_kind: str  # "tensor", "tuple" (of tensors only) or "other": how the module returned its tensors


@dataclass
class ModuleBinding:
    """The kernel's arguments as the module's (`arg:K`, the K-th tensor the forward was given; `param:NAME`, the
    instance's own parameter or buffer), its outputs, and per instance the attributes guarded; or why none."""

    args: list[str] = field(default_factory=list)
    outputs: int = 0
    output_kind: str = "tensor"
    instances: list[dict[str, Any]] = field(default_factory=list)
    why_not: str = ""

    def to_json(self) -> dict[str, Any]:
        if self.why_not:
            return {"why_not": self.why_not}
        return {
            "args": self.args,
            "outputs": self.outputs,
            "output_kind": self.output_kind,
            "instances": self.instances,
        }


def record_calls(model: torch.nn.Module, paths: list[str], inputs: tuple) -> dict[str, Call]:
    """One eager forward with a hook on each path: the tensors each instance was given and returned (first call)."""
    calls: dict[str, Call] = {}
    hooks = []

    def hook(path: str):
        def after(_m: torch.nn.Module, args: tuple, kwargs: dict, out: Any) -> None:
            if path not in calls:
                tensors = isinstance(out, tuple) and all(isinstance(t, torch.Tensor) for t in out)
                kind = "tensor" if isinstance(out, torch.Tensor) else "tuple" if tensors else "other"
                calls[path] = Call(outputs((args, kwargs)), outputs(out), kind)

        return after

    try:
        for path in paths:
            hooks.append(model.get_submodule(path).register_forward_hook(hook(path), with_kwargs=True))
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in hooks:
            h.remove()
    return calls


def guards_of(module: torch.nn.Module) -> dict[str, Any]:
    """The instance's plain attributes (not private, not `training`): the constants its captured ops baked in."""
    return {
        k: v
        for k, v in sorted(vars(module).items())
        if not k.startswith("_") and k != "training" and type(v) in GUARD_TYPES
    }


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and bool(torch.equal(a, b))


def _argument(p: Program, v: int, path: str, call: Call) -> str:
    value = p.cap.values[v]
    prefix = f"{path}." if path else ""
    if value.source in ("param", "buffer") and value.name.startswith(prefix):
        return f"param:{value.name.removeprefix(prefix)}"
    found = [k for k, t in enumerate(call.args) if _same(t, p.cap.tensors[v])]
    if len(found) != 1:
        raise ValueError(
            f"input {p.names[v]} is "
            + ("two of the module's arguments at once" if found else "neither an argument nor a parameter of it")
        )
    return f"arg:{found[0]}"


def module_binding(model: torch.nn.Module, programs: list[Program], inputs: tuple) -> ModuleBinding:
    """The binding of a module region from its instances' programs in the first label's capture."""
    paths = [p.instance.path for p in programs]
    if any(not path for path in paths):
        return ModuleBinding(why_not="the region is the whole model: nothing to bind it to")
    try:
        calls = record_calls(model, paths, inputs)
    except Exception as exc:  # noqa: BLE001 - the user's model: its failure is the reason, in one line
        return ModuleBinding(why_not=f"the eager pass with hooks failed: {type(exc).__name__}: {str(exc)[:120]}")
    found = ModuleBinding()
    for p in programs:
        path = p.instance.path
        call = calls.get(path)
        if call is None:
            return ModuleBinding(why_not=f"{path} was not called in the eager pass")
        try:
            args = [_argument(p, v, path, call) for v in p.inputs]
        except ValueError as exc:
            return ModuleBinding(why_not=f"{path}: {exc}")
        if call.output_kind == "other":
            return ModuleBinding(why_not=f"{path} returns more than tensors: bind it at a graph swap (not built)")
        outs = [p.cap.tensors[v] for v in p.outputs]
        if len(outs) != len(call.outputs) or not all(_same(a, b) for a, b in zip(outs, call.outputs)):
            return ModuleBinding(why_not=f"{path}: the region's outputs are not what the module returns")
        if found.instances and (args != found.args or call.output_kind != found.output_kind):
            return ModuleBinding(why_not=f"{path} takes its inputs unlike {found.instances[0]['module']}")
        found.args, found.outputs, found.output_kind = args, len(outs), call.output_kind
        module = model.get_submodule(path)
        found.instances.append({"module": path, "class": type(module).__qualname__, "guards": guards_of(module)})
    return found
