"""Loading the kernel inside the worker: its module imported under one name for both sides, a C++
candidate's library taken from the trusted build store, a KernelBench model built with the reference's
weights from the sealed state segment. Any failure is the candidate's verdict."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernel_agent.core.verdict import Status
from kernel_agent.sandbox.inside.kernel_call import one_line, where
from kernel_agent.sandbox.protocol import CallError

MODULE_NAME = "ka_kernel_module"  # the same for both sides (see process.ROLE_TAGS)


def import_kernel(source_path: str, build_store: str | None) -> Any:
    """The candidate's (or baseline's) module, imported from its file."""
    if build_store:  # a cpp candidate: its library was built and placed by the trusted side
        from kernel_agent import cpp

        cpp.use_trusted_store(Path(build_store))
    try:
        spec = importlib.util.spec_from_file_location(MODULE_NAME, source_path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[MODULE_NAME] = module
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        raise CallError(Status.COMPILE_ERROR, f"SyntaxError: {exc.msg} (line {exc.lineno})") from None
    except BaseException as exc:  # noqa: BLE001 - any failure to load is the candidate's
        if isinstance(exc, SystemExit):
            raise CallError(Status.CRASHED, f"candidate called exit({exc.code}) while loading") from None
        raise CallError(Status.COMPILE_ERROR, f"import failed: {one_line(exc)}{where(exc, source_path)}") from None
    return module


def entry_point(module: Any, entry: str, model: Callable[[Any], Any] | None) -> Callable[..., Any]:
    """What the worker calls: the module's `entry`, or (KernelBench) the model `model` builds from that class."""
    target = getattr(module, entry, None)
    if target is None:
        raise CallError(Status.COMPILE_ERROR, f"the module defines no `{entry}`")
    if model is not None:
        return model(target)
    if not callable(target):
        raise CallError(Status.COMPILE_ERROR, f"`{entry}` is not callable")
    return target


def build_model(target: Any, entry: str, state: dict[str, Any], init_args: list[Any], device: str) -> Any:
    """A KernelBench module built with the reference's weights."""
    try:
        model = target(*init_args)
        model.load_state_dict(state, strict=True)
        return model.to(device).eval()
    except BaseException as exc:  # noqa: BLE001
        raise CallError(
            Status.COMPILE_ERROR, f"could not build {entry} with the reference weights: {one_line(exc)}"
        ) from None
