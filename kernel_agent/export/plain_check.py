"""Run an export's winner once more in a plain process, as its users will, before it ships (THREATS H4).

Inside the sandbox a candidate can tell it is being evaluated (its uid, its mounts, its cgroup, the
worker on its command line): code that is honest there and wrong anywhere else reads `faster` in every
verdict. So before a winner ships it runs in an ordinary child process of the user's: their uid, an
environment without kernel-agent's variables or anything that looks like a secret, a fresh temporary
folder, no sandbox, no worker, no shared memory. Fresh inputs of each check shape go in as a file, its
outputs come back as one, and the orchestrator compares them with the reference under the checks' rules.
That process is outside the sandbox on purpose: it is where the package will run; the winner has passed
its sandboxed checks, its review and the static scan first.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from kernel_agent.evaluate.backends import detect_backend
from kernel_agent.evaluate.compare import compare
from kernel_agent.evaluate.preparation import INTERPRETER_MAX_ELEMENTS
from kernel_agent.evaluate.tolerance import checked_tolerance
from kernel_agent.problem.load import Problem
from kernel_agent.problem.oracle import CaseMaker, fresh_seed
from kernel_agent.sandbox.host.shm import nbytes

CASE_BYTES = 256 << 20  # a case's inputs beyond this stay out (one smallest case always runs)
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "DATABASE_URL", "CREDENTIAL")

RUNNER = r"""
import importlib.util
import sys

import torch

source, entry, cases_path, out_path, device = sys.argv[1:6]
spec = importlib.util.spec_from_file_location("winner", source)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
cases = torch.load(cases_path)
target = getattr(module, entry)
if cases["state"] is not None:
    model = target(*cases["state"]["init_args"])
    model.load_state_dict(cases["state"]["weights"])
    target = model.to(device).eval()
outputs = []
with torch.no_grad():
    for inputs in cases["inputs"]:
        result = target(*[t.to(device) for t in inputs])
        result = (result,) if isinstance(result, torch.Tensor) else tuple(result)
        outputs.append([r.detach().cpu() for r in result])
torch.save(outputs, out_path)
"""


def plain_env() -> dict[str, str]:
    """The user's environment less kernel-agent's own variables and anything named like a secret."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("KERNEL_AGENT_") and not any(word in key.upper() for word in SECRET_WORDS)
    }


def plain_check(problem: Problem, source: str, device: str, timeout: float) -> str | None:
    """None when the winner, run in a plain process on a fresh case of each check shape, matches the
    reference; else the one-line reason it may not ship."""
    maker = CaseMaker(problem, device)
    cases = []
    for dtype in problem.dtypes:
        for shape in problem.all_check_shapes():
            inputs = maker.inputs(shape, dtype, problem.distributions[0], fresh_seed())
            cases.append((shape, dtype, inputs))
    smallest = min(nbytes(inputs) for _, _, inputs in cases)
    cases = [case for case in cases if nbytes(case[2]) <= max(CASE_BYTES, smallest)]
    interpreted = device == "cpu" and detect_backend(source) == "triton"
    if interpreted:  # the interpreter takes minutes on a benchmark shape: the shapes its checks ran on
        small = [case for case in cases if math.prod(case[0]) <= INTERPRETER_MAX_ELEMENTS]
        cases = small or cases[:1]
    state = None
    if problem.kind == "kernelbench":
        names, tensors = maker.state()
        state = {"init_args": maker.init_args, "weights": dict(zip(names, tensors))}
    with tempfile.TemporaryDirectory(prefix="kernel-agent-plain-") as folder:
        work = Path(folder)
        (work / "winner.py").write_text(source)
        torch.save({"inputs": [inputs for _, _, inputs in cases], "state": state}, work / "cases.pt")
        entry = "ModelNew" if problem.kind == "kernelbench" else "kernel"
        command = [sys.executable, "-c", RUNNER, "winner.py", entry, "cases.pt", "outputs.pt", device]
        env = plain_env()
        if interpreted:
            env["TRITON_INTERPRET"] = "1"  # a winner exported as verified under the interpreter, as it was verified
        try:
            proc = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"in a plain process it did not finish within {timeout:.0f} s"
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
            return f"in a plain process it failed (exit {proc.returncode}): {last}"
        try:
            outputs = torch.load(work / "outputs.pt")
        except Exception as exc:  # noqa: BLE001 - whatever it wrote: refused, with the reason
            return f"in a plain process its outputs could not be read: {type(exc).__name__}: {exc}"[:300]
    if not isinstance(outputs, list) or len(outputs) != len(cases):
        return f"in a plain process it returned no result for each of the {len(cases)} cases"
    for (shape, dtype, inputs), got in zip(cases, outputs):
        gold, base = maker.reference(inputs)
        result = compare(got, gold, base, checked_tolerance(problem, dtype, device).tolerance)
        if not result.passed:
            assert result.mismatch is not None
            label = f"shape={list(shape)} dtype={dtype}"
            return f"in a plain process (outside the sandbox) it is wrong: {label}: {result.mismatch.line()}"
    return None
