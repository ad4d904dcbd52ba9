"""A region's kernel bound to the module instances it was found in (binding B1, written by `regions` into each
region.json): the instance's forward becomes the kernel called with the forward's own tensors and the instance's
own parameters, in the problem's input order.

Why guards: the captured ops baked in the module's constants (an epsilon, a size). An instance whose attributes
differ from the captured ones, or that is no longer the captured class, stays unswapped with the reason; a call
whose tensors do not have the captured dtypes runs the module's own forward and is counted as a guard miss, so a
model whose calls all missed cannot read as "correct, no gain".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernel_agent.prove.model_ab import outputs
from kernel_agent.prove.recipe import Binding, ModelCase, RecipeError, load_recipe


@dataclass
class Bound:
    """What binding did to one model: per instance path swapped, per instance path not swapped and why, and the
    calls that took the module's own forward because a guard missed (path -> reason -> count)."""

    swapped: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    misses: dict[str, dict[str, int]] = field(default_factory=dict)

    def misses_by_reason(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for reasons in self.misses.values():
            for reason, n in reasons.items():
                found[reason] = found.get(reason, 0) + n
        return found

    def reset(self) -> None:
        for reasons in self.misses.values():
            reasons.clear()


def read_bindings(folder: Path) -> tuple[dict[str, Binding], dict[str, str]]:
    """The bindings of a regions output folder's problems, and for each problem without one, why."""
    found: dict[str, Binding] = {}
    why: dict[str, str] = {}
    for meta in sorted((folder / "problems").glob("*/region.json")):
        problem = meta.parent.name
        try:
            data = json.loads(meta.read_text())
            bind = data.get("bind") or {}
            if not bind or bind.get("why_not"):
                why[problem] = bind.get("why_not") or f"a {data.get('binding', '?')} region: only module regions bind"
                continue
            dtypes = tuple(data["inputs"][f"in{k}"]["dtype"] for k in range(len(bind["args"])))
            found[problem] = Binding(
                problem,
                str(data["id"]),
                tuple(str(a) for a in bind["args"]),
                dtypes,
                int(bind["outputs"]),
                str(bind["output_kind"]),
                tuple(
                    (str(i["module"]), str(i["class"]), tuple(sorted(dict(i["guards"]).items())))
                    for i in bind["instances"]
                ),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            why[problem] = f"region.json unreadable: {type(exc).__name__}: {str(exc)[:100]}"
    return found, why


def read_shares(folder: Path) -> dict[str, dict[str, Any]]:
    """Each emitted module region's shares timed by hooks in regions.json (problem folder -> {"threads": n,
    label: [median, low, high]}): what `e2e` measures again and compares."""
    try:
        data = json.loads((folder / "regions.json").read_text())
        found = {}
        for r in data.get("regions", []):
            if r.get("emitted") and r.get("share_hooks"):
                found[Path(str(r["folder"])).name] = {"threads": data.get("threads"), **r["share_hooks"]}
        return found
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


def regions_case(spec: str, size: str, folder: Path) -> ModelCase:
    """The user's recipe with the bindings of the regions in `folder` (the generated recipe.py calls this)."""
    case = load_recipe(spec, size)
    try:
        case.bindings, case.unbound = read_bindings(folder)
    except OSError as exc:
        raise RecipeError(f"cannot read the regions in {folder}: {exc}") from None
    case.region_shares = read_shares(folder)
    return case


def _guard_miss(module: torch.nn.Module, cls: str, guards: tuple[tuple[str, Any], ...]) -> str:
    if type(module).__qualname__ != cls:
        return f"is a {type(module).__qualname__}, captured as {cls}"
    for key, want in guards:
        have = getattr(module, key, None)
        if have != want:
            return f"{key} is {have!r}, captured as {want!r}"
    return ""


def bind(model: torch.nn.Module, binding: Binding, kernel: Callable[..., Any]) -> Bound:
    """Swap `kernel` into each of the binding's instances in `model` whose guards hold."""
    done = Bound()
    for path, cls, guards in binding.instances:
        try:
            module = model.get_submodule(path)
        except AttributeError:
            done.refused[path] = "the model has no module at this path"
            continue
        miss = _guard_miss(module, cls, guards)
        if miss:
            done.refused[path] = miss
            continue
        module.forward = _bound_forward(module, binding, kernel, done.misses.setdefault(path, {}))
        done.swapped.append(path)
    return done


def _bound_forward(
    module: torch.nn.Module, binding: Binding, kernel: Callable[..., Any], misses: dict[str, int]
) -> Callable[..., Any]:
    own = module.forward  # the class's forward bound to this instance: what runs when a call's guard misses
    # each kernel argument, worked out once: the instance's own tensor, or the index of the forward's tensor
    plan = [_own_tensor(module, a[6:]) if a.startswith("param:") else int(a[4:]) for a in binding.args]

    def forward(*args: Any, **kwargs: Any) -> Any:
        given = outputs((args, kwargs))
        values = [a if isinstance(a, torch.Tensor) else given[a] if a < len(given) else None for a in plan]
        miss = _call_miss(values, binding.dtypes)
        if miss:
            misses[miss] = misses.get(miss, 0) + 1
            return own(*args, **kwargs)
        got = outputs(kernel(*values))
        return got[0] if binding.output_kind == "tensor" else tuple(got)

    return forward


def _own_tensor(module: torch.nn.Module, name: str) -> torch.Tensor:
    """The instance's parameter or buffer at `name` (a dotted path below it)."""
    try:
        return module.get_parameter(name)
    except AttributeError:
        return module.get_buffer(name)


def _call_miss(values: list[Any], dtypes: tuple[str, ...]) -> str:
    for k, (value, dtype) in enumerate(zip(values, dtypes)):
        if not isinstance(value, torch.Tensor):
            return f"input {k} is not a tensor in this call"
        if str(value.dtype).removeprefix("torch.") != dtype:
            return f"input {k} is {str(value.dtype).removeprefix('torch.')}, the kernel was verified on {dtype}"
    return ""
