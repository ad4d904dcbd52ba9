"""The package loaded the way its users load it, each certified op called on fresh inputs, outputs judged here.

Why besides the sandboxed re-measurement: that one evaluates the certified source; users run the package through
its own entry points (`import PKG` for pip, `kernels.get_local_kernel` for hf-kernels, which checks the variant's
digest itself), its dispatch and, for hf-kernels, its torch.library ops. Like export's plain check (THREATS H4) it
runs in an ordinary child process of the user's, outside the sandbox, after the digests were checked: that is
where the package runs.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from kernel_agent.evaluate.compare import compare
from kernel_agent.evaluate.tolerance import checked_tolerance
from kernel_agent.export.plain_check import plain_env
from kernel_agent.problem.load import Problem
from kernel_agent.problem.oracle import CaseMaker, fresh_seed

MAX_ELEMENTS = 1 << 20  # check shapes only, each case's largest input capped (the timing is the sandbox's job)

RUNNER = r"""
import importlib
import sys
from pathlib import Path

import torch

root, fmt, package, cases_path, out_path = sys.argv[1:6]
if fmt == "pip":
    sys.path.insert(0, root)
    module = importlib.import_module(package)
    loader = "import " + package
else:
    import kernels
    module = kernels.get_local_kernel(Path(root) / "build")
    loader = "kernels " + kernels.__version__ + " get_local_kernel"
cases = torch.load(cases_path)
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
torch.save({"outputs": outputs, "paths": paths, "loader": loader}, out_path)
"""


@dataclass(frozen=True)
class Loaded:
    """One kernel called through the loaded package: which path it took, and why it is wrong (None: it is not)."""

    kernel: str
    path: str | None
    wrong: str | None
    loader: str


def _cases(problem: Problem, device: str) -> list[tuple[tuple[int, ...], str, list[torch.Tensor]]]:
    maker = CaseMaker(problem, device)
    found = []
    for dtype in problem.dtypes:
        for shape in problem.check_shapes or problem.shapes[:1]:
            if torch.Size(shape).numel() <= MAX_ELEMENTS:
                found.append((shape, dtype, maker.inputs(shape, dtype, problem.distributions[0], fresh_seed())))
    return found


def call_loaded(
    root: Path, fmt: str, package: str, problems: dict[str, tuple[Problem, str]], timeout: float
) -> list[Loaded]:
    """Load the package at `root` in a plain process and call each kernel of `problems` (name -> problem, device)
    on a fresh case of each check shape; compare the outputs with the float64 reference under the checks' rules."""
    cases = {name: _cases(problem, device) for name, (problem, device) in problems.items()}
    with tempfile.TemporaryDirectory(prefix="kernel-agent-loaded-") as folder:
        work = Path(folder)
        torch.save({name: [inputs for _, _, inputs in found] for name, found in cases.items()}, work / "cases.pt")
        command = [sys.executable, "-c", RUNNER, str(root.resolve()), fmt, package, "cases.pt", "out.pt"]
        try:
            proc = subprocess.run(command, cwd=work, env=plain_env(), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return [
                Loaded(name, None, f"the loaded package did not answer within {timeout:.0f} s", "") for name in cases
            ]
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
            return [
                Loaded(name, None, f"the package failed to load or run (exit {proc.returncode}): {last}", "")
                for name in cases
            ]
        try:
            result = torch.load(work / "out.pt", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - whatever it wrote: judged as wrong, with the reason
            return [Loaded(name, None, f"its outputs could not be read: {type(exc).__name__}", "") for name in cases]
    return [_judge(name, problems[name], found, result) for name, found in cases.items()]


def _judge(name: str, spec: tuple[Problem, str], found: list, result: dict) -> Loaded:
    problem, device = spec
    loader = str(result.get("loader", ""))[:80]
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
