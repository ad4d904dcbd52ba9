"""Capture one forward pass per shape label, deterministically: `torch.export` (non-strict, static shapes), or,
when export fails, a dispatch-mode trace of the eager forward. Either gives the same records (`records.py`).

Why export first: its graph is functional (no mutation, no aliasing surprises) and each node carries the module
stack it came from. Why a trace as the fallback: it always runs (it records the branch the inputs took), so a
model with data-dependent control flow still yields its regions; the output says which capture was used and why.
The export graph is not decomposed (`run_decompositions` would turn `linear` into `permute` + `addmm`): the
regions keep the ops the model runs, so a region's reference reproduces the model's values bit for bit.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from kernel_agent.regions.records import Capture, Op, Ref, Value, dtype_name

DROPPED = ("aten._assert_tensor_metadata", "aten._assert_async", "aten._assert_scalar", "aten.sym_constrain_range")


class CaptureError(RuntimeError):
    """A model neither export nor the trace can capture: one line."""


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:160] if text else ''}"


def capture(model: torch.nn.Module, inputs: tuple, label: str, mode: str = "auto") -> Capture:
    """The forward pass at `inputs` as records; `mode` auto (export, else the trace), export or trace."""
    if mode != "trace":
        try:
            ep = torch.export.export(model, tuple(inputs), strict=False)
        except Exception as exc:  # noqa: BLE001 - any export failure is a reason to trace, said in one line
            if mode == "export":
                raise CaptureError(f"{label}: torch.export failed: {_line(exc)}") from None
            return _trace(model, inputs, label, f"torch.export failed ({_line(exc)}); a dispatch trace instead")
        nested = _higher_order(ep)
        if nested is None:
            return _Recorder(label, "export", "torch.export (non-strict, static shapes)").from_export(ep, inputs)
        why = f"the exported graph nests ops in a higher-order op ({nested}), which no region can be cut across"
        if mode == "export":
            raise CaptureError(f"{label}: {why}")
        return _trace(model, inputs, label, f"{why}; a dispatch trace instead")
    return _trace(model, inputs, label, "--capture trace")


def _higher_order(ep: Any) -> str | None:
    """The first higher-order op of an exported graph (`wrap_with_autocast` around an `autocast(enabled=False)`
    block, as transformers' rotary embedding has on CUDA; `wrap_with_set_grad_enabled` around `no_grad`): its
    ops sit in a submodule the flat graph does not show."""
    for node in ep.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator):
            return str(getattr(node.target, "__name__", node.target))
    return None


def _trace(model: torch.nn.Module, inputs: tuple, label: str, why: str) -> Capture:
    try:
        return _Recorder(label, "trace", why).from_trace(model, inputs)
    except Exception as exc:  # noqa: BLE001 - the model's own failure, in one line
        raise CaptureError(f"{label}: the dispatch trace failed too: {_line(exc)}") from None


def _target(fn: Any) -> str:
    if isinstance(fn, torch._ops.OpOverload):
        return f"{fn.namespace}.{fn._schema.name.split('::')[-1]}.{fn._overloadname}"
    return getattr(fn, "__name__", str(fn))


class _Recorder:
    def __init__(self, label: str, mode: str, why: str) -> None:
        self.label, self.mode, self.why = label, mode, why
        self.values: dict[int, Value] = {}
        self.tensors: dict[int, torch.Tensor] = {}
        self.ops: list[Op] = []
        self.memory: dict[tuple, int] = {}  # (data_ptr, shape, stride, offset, dtype) -> the first value there

    def value(self, tensor: torch.Tensor, source: str, name: str = "", producer: int | None = None) -> int:
        vid = len(self.values)
        key = (tensor.data_ptr(), tuple(tensor.shape), tensor.stride(), tensor.storage_offset(), tensor.dtype)
        alias = self.memory.get(key) if tensor.numel() else None
        if alias is None and tensor.numel():
            self.memory[key] = vid
        self.values[vid] = Value(vid, tuple(tensor.shape), dtype_name(tensor.dtype), source, name, producer, alias)
        self.tensors[vid] = tensor
        return vid

    def finish(self, outputs: list[int], user: list[int]) -> Capture:
        return Capture(self.label, self.mode, self.why, self.ops, self.values, self.tensors, outputs, user)

    # ---- export ---------------------------------------------------------------------------------------------
    def from_export(self, ep: Any, inputs: tuple) -> Capture:
        from torch.export.graph_signature import InputKind

        leaves, _ = tree_flatten(tuple(inputs))
        user_leaves = iter(leaves)
        env: dict[str, Any] = {}
        user: list[int] = []
        placeholders = [n for n in ep.graph.nodes if n.op == "placeholder"]
        for node, spec in zip(placeholders, ep.graph_signature.input_specs):
            if spec.kind == InputKind.USER_INPUT:
                item = next(user_leaves)
                if isinstance(item, torch.Tensor):
                    env[node.name] = self.value(item, "input", f"input {len(user)}")
                    user.append(env[node.name])
                else:
                    env[node.name] = item
                continue
            tensor = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
            source = {InputKind.PARAMETER: "param", InputKind.BUFFER: "buffer"}.get(spec.kind, "const")
            env[node.name] = self.value(tensor.detach(), source, spec.target)
        slots: dict[str, list[int | None]] = {}
        with torch.no_grad():
            for node in ep.graph.nodes:
                if node.op != "call_function":
                    continue
                if node.target is operator.getitem:
                    env[node.name] = slots[node.args[0].name][node.args[1]]
                    continue
                target = _target(node.target)
                if target.startswith(DROPPED):
                    continue
                args, kwargs = self._template(node.args, env), self._template(node.kwargs, env)
                result = node.target(*self._real(args), **self._real(kwargs))
                op = self._op(target, args, kwargs, result, _stack(node.meta.get("nn_module_stack") or {}))
                slots[node.name] = op.outputs
                if not op.tuple_out and op.outputs:
                    env[node.name] = op.outputs[0]
        output = next(n for n in ep.graph.nodes if n.op == "output")
        outs = [env[a.name] for a in tree_flatten(output.args)[0] if isinstance(a, torch.fx.Node)]
        return self.finish([o for o in outs if isinstance(o, int)], user)

    def _template(self, item: Any, env: dict[str, Any]) -> Any:
        if isinstance(item, torch.fx.Node):
            found = env[item.name]
            return Ref(found) if isinstance(found, int) else found
        if isinstance(item, (list, tuple)):
            return type(item)(self._template(x, env) for x in item)
        if isinstance(item, dict):
            return {k: self._template(v, env) for k, v in item.items()}
        return item

    def _real(self, item: Any) -> Any:
        if isinstance(item, Ref):
            return self.tensors[item.value]
        if isinstance(item, (list, tuple)):
            return type(item)(self._real(x) for x in item)
        if isinstance(item, dict):
            return {k: self._real(v) for k, v in item.items()}
        return item

    def _op(self, target: str, args: Any, kwargs: Any, result: Any, stack: list[tuple[str, str]]) -> Op:
        index = len(self.ops)
        tuple_out = isinstance(result, (tuple, list))
        items = list(result) if tuple_out else [result]
        outputs = [
            self.value(t, "op", f"{target}#{index}", index) if isinstance(t, torch.Tensor) else None for t in items
        ]
        op = Op(
            index, target, tuple(args), dict(kwargs), outputs, tuple_out, [p for p, _ in stack], [c for _, c in stack]
        )
        self.ops.append(op)
        return op

    # ---- trace ----------------------------------------------------------------------------------------------
    def from_trace(self, model: torch.nn.Module, inputs: tuple) -> Capture:
        ids: dict[int, int] = {}  # id(tensor object) -> its latest value
        keep: list[torch.Tensor] = []  # the objects whose ids are keys (so no id is reused while tracing)
        for name, p in [*model.named_parameters(), *model.named_buffers()]:
            kind = "param" if isinstance(p, torch.nn.Parameter) else "buffer"
            ids[id(p)] = self.value(p.detach(), kind, name)
            keep.append(p)
        leaves, _ = tree_flatten(tuple(inputs))
        user = []
        for i, t in enumerate(x for x in leaves if isinstance(x, torch.Tensor)):
            ids[id(t)] = self.value(t, "input", f"input {i}")
            user.append(ids[id(t)])
            keep.append(t)
        stack: list[tuple[str, str]] = [("", type(model).__qualname__)]
        hooks = []
        for name, m in model.named_modules():
            if not name:
                continue
            cls = f"{type(m).__module__}.{type(m).__qualname__}"
            hooks.append(m.register_forward_pre_hook(lambda _m, _a, n=name, c=cls: stack.append((n, c)) and None))
            hooks.append(m.register_forward_hook(lambda _m, _a, _o: stack.pop() and None))  # None: output unchanged
        recorder = self

        def ref(item: Any) -> Any:
            if isinstance(item, torch.Tensor):
                if id(item) not in ids:
                    ids[id(item)] = recorder.value(item.detach().clone(), "const", f"const {len(recorder.values)}")
                    keep.append(item)
                return Ref(ids[id(item)])
            if isinstance(item, (list, tuple)):
                return type(item)(ref(x) for x in item)
            if isinstance(item, dict):
                return {k: ref(v) for k, v in item.items()}
            return item

        class Trace(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
                kwargs = kwargs or {}
                targs, tkwargs = ref(args), ref(kwargs)
                result = func(*args, **kwargs)
                target = _target(func)
                if target.startswith(DROPPED):
                    return result
                items = list(result) if isinstance(result, (tuple, list)) else [result]
                snap = [t.detach().clone() if isinstance(t, torch.Tensor) else t for t in items]
                snapped = type(result)(snap) if isinstance(result, (tuple, list)) else snap[0]
                op = recorder._op(target, targs, tkwargs, snapped, list(stack))
                for t, vid in zip(items, op.outputs):
                    if isinstance(t, torch.Tensor) and vid is not None:
                        ids[id(t)] = vid
                        keep.append(t)
                return result

        try:
            with torch.no_grad(), Trace():
                out = model(*inputs)
        finally:
            for h in hooks:
                h.remove()
        outs = [ids[id(t)] for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor) and id(t) in ids]
        return self.finish(outs, user)


def _stack(meta: dict[str, Any]) -> list[tuple[str, str]]:
    found = [("", "")]
    for path, cls in meta.values():
        name = str(path)
        if name and name not in [p for p, _ in found]:
            found.append((name, cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"))
    return found


def check_against_eager(model: torch.nn.Module, inputs: tuple, cap: Capture) -> str | None:
    """The captured outputs must equal the eager model's, bit for bit: else the capture is not the model."""
    with torch.no_grad():
        eager = [t for t in tree_flatten(model(*inputs))[0] if isinstance(t, torch.Tensor)]
    got = [cap.tensors[v] for v in cap.outputs]
    if len(got) != len(eager) or not all(torch.equal(a, b) for a, b in zip(got, eager)):
        worst = max((float((a.double() - b.double()).abs().max()) for a, b in zip(got, eager)), default=float("nan"))
        return f"{cap.label}: the {cap.mode} capture's outputs differ from the eager model's (max abs diff {worst:.3g})"
    return None
