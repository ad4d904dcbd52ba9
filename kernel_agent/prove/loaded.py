"""The package loaded the way its users load it, each certified op called on fresh inputs, outputs judged here.

Why besides the sandboxed re-measurement: that one evaluates the certified source; users run the package through
its own entry points (`import PKG` for pip, `kernels.get_local_kernel` for hf-kernels, which checks the variant's
digest itself), its dispatch and, for hf-kernels, its torch.library ops. Like export's plain check (THREATS H4) it
runs in a process that looks like a user's and owns nothing the tool reads later (export/user_process.py), on a
copy of the package made from its manifest after the digests were checked (prove/shipped.py `copy_sealed`), so
the code imported is the code checked. The inputs are drawn after the package is loaded, in two rounds.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import torch

from kernel_agent.evaluate.compare import compare
from kernel_agent.evaluate.tolerance import checked_tolerance
from kernel_agent.export.user_process import UserProcess, UserProcessError
from kernel_agent.problem.load import Problem
from kernel_agent.problem.oracle import CaseMaker, fresh_seed
from kernel_agent.prove.shipped import Variant, copy_sealed

MAX_ELEMENTS = 1 << 20  # check shapes only, each case's largest input capped (the timing is the sandbox's job)
ROUNDS = 2  # rounds of fresh inputs, each drawn after the previous one's outputs came back

DRIVER = r"""
from pathlib import Path

if FORMAT == "pip":
    import importlib

    module = importlib.import_module(PACKAGE)
    loader = "import " + PACKAGE
else:
    import kernels

    module = kernels.get_local_kernel(Path("build").resolve())
    loader = "kernels " + kernels.__version__ + " get_local_kernel"


def call(cases):
    outputs, paths = {}, {}
    with torch.no_grad():
        for kernel, items in cases.items():
            function = getattr(module, kernel)
            results = []
            for inputs in items:
                result = function(*inputs)
                result = (result,) if isinstance(result, torch.Tensor) else tuple(result)
                results.append([r.detach().cpu() for r in result])
            outputs[kernel] = results
            paths[kernel] = module.last_path(kernel) if hasattr(module, "last_path") else None
    return {"outputs": outputs, "paths": paths}


serve(loader, call)
"""


@dataclass(frozen=True)
class Loaded:
    """One kernel called through the loaded package: which path it took, and why it is wrong (None: it is not)."""

    kernel: str
    path: str | None
    wrong: str | None
    loader: str


Case = tuple[tuple[int, ...], str, list[torch.Tensor]]


def _cases(problem: Problem, device: str) -> list[Case]:
    maker = CaseMaker(problem, device)
    found = []
    for dtype in problem.dtypes:
        for shape in problem.check_shapes or problem.shapes[:1]:
            if torch.Size(shape).numel() <= MAX_ELEMENTS:
                found.append((shape, dtype, maker.inputs(shape, dtype, problem.distributions[0], fresh_seed())))
    return found


def call_loaded(variant: Variant, problems: dict[str, tuple[Problem, str]], timeout: float) -> list[Loaded]:
    """Load `variant` of a package (its digests checked) in a user's process and call each kernel of `problems`
    (name -> problem, device) on fresh cases of each check shape, drawn once it is loaded; compare the outputs with
    the float64 reference under the checks' rules."""
    fmt = variant.bundle.format
    driver = f"FORMAT = {fmt!r}\nPACKAGE = {variant.bundle.package!r}\n" + DRIVER
    where = (lambda folder: folder) if fmt == "pip" else (lambda folder: folder / "build")
    found: dict[str, list[Case]] = {name: [] for name in problems}
    try:
        with UserProcess(driver, {}, timeout, prepare=lambda folder: copy_sealed(variant, where(folder))) as process:
            loader = str(torch.load(io.BytesIO(process.loaded()), weights_only=True))[:80]
            for _ in range(ROUNDS):
                found = {name: _cases(problem, device) for name, (problem, device) in problems.items()}
                buffer = io.BytesIO()
                torch.save({name: [inputs for _, _, inputs in cases] for name, cases in found.items()}, buffer)
                try:
                    result = torch.load(io.BytesIO(process.ask(buffer.getvalue())), weights_only=True)
                except UserProcessError:
                    raise
                except Exception as exc:  # noqa: BLE001 - whatever it wrote: judged as wrong, with the reason
                    why = f"its outputs could not be read: {type(exc).__name__}"
                    return [Loaded(name, None, why, loader) for name in problems]
                judged = [_judge(name, problems[name], cases, result, loader) for name, cases in found.items()]
                if any(x.wrong for x in judged):
                    return judged
    except UserProcessError as exc:
        why = f"the loaded package {exc}" if "within" in str(exc) else f"the package failed to load or run: {exc}"
        return [Loaded(name, None, why, "") for name in problems]
    return judged


def _judge(name: str, spec: tuple[Problem, str], found: list[Case], result: dict, loader: str) -> Loaded:
    problem, device = spec
    path = result.get("paths", {}).get(name)
    got = result.get("outputs", {}).get(name)
    if not isinstance(got, list) or len(got) != len(found):
        return Loaded(name, path, "the loaded package returned no result for each case", loader)
    maker = CaseMaker(problem, device)
    for (shape, dtype, inputs), outputs in zip(found, got):
        gold, base = maker.reference(inputs)
        verdict = compare(outputs, gold, base, checked_tolerance(problem, dtype, device).tolerance)
        if not verdict.passed:
            assert verdict.mismatch is not None
            return Loaded(name, path, f"shape={list(shape)} dtype={dtype}: {verdict.mismatch.line()}", loader)
    return Loaded(name, path if isinstance(path, str) else None, None, loader)
