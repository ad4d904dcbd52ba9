"""Run an export's winner once more in a plain process, as its users will, before it ships (THREATS H4).

Inside the sandbox a candidate can tell it is being evaluated (its uid, its mounts, its cgroup, the
worker on its command line): code that is honest there and wrong anywhere else reads `faster` in every
verdict. So before a winner ships it runs in a process that looks like a user's (export/user_process.py:
a folder and a module named as a user's, a driver with no arguments, inputs on its stdin, no kernel-agent
name in its environment, command line, parent or modules) and owns nothing the tool later reads (as root,
an unused uid). The winner ships as a package module does, its `kernel_agent.cpp` imports pointed at a copy
of the loader beside it. Once it is loaded, fresh inputs of each check shape are drawn, sent, and its outputs
compared with the reference under the checks' rules; then a second round of fresh draws, so code that keys
on the first inputs it sees is caught too. That process is outside the sandbox's walls on purpose: it is
where the package will run; the winner has passed its sandboxed checks, its review and the static scan first.
"""

from __future__ import annotations

import io
import math

import torch

from kernel_agent.evaluate.backends import detect_backend
from kernel_agent.evaluate.compare import compare
from kernel_agent.evaluate.preparation import INTERPRETER_MAX_ELEMENTS
from kernel_agent.evaluate.tolerance import checked_tolerance
from kernel_agent.export.files import cpp_loader, identifier, rewrite_imports
from kernel_agent.export.user_process import UserProcess, UserProcessError
from kernel_agent.problem.load import Problem
from kernel_agent.problem.oracle import CaseMaker, fresh_seed
from kernel_agent.sandbox.host.shm import nbytes

CASE_BYTES = 256 << 20  # a case's inputs beyond this stay out (one smallest case always runs)
ROUNDS = 2  # rounds of fresh inputs, each drawn after the previous one's outputs came back
PACKAGE = "ops"  # the folder the winner ships in here, named as a user's package might be

DRIVER = r"""
import importlib

module = importlib.import_module(MODULE)
target = getattr(module, ENTRY)


def call(batch):
    run = target
    if batch["state"] is not None:
        model = target(*batch["state"]["init_args"])
        model.load_state_dict(batch["state"]["weights"])
        run = model.to(DEVICE).eval()
    outputs = []
    with torch.no_grad():
        for inputs in batch["inputs"]:
            result = run(*[t.to(DEVICE) for t in inputs])
            result = (result,) if isinstance(result, torch.Tensor) else tuple(result)
            outputs.append([r.detach().cpu() for r in result])
    return outputs


serve(None, call)
"""

Case = tuple[tuple[int, ...], str, list[torch.Tensor]]


def draw(problem: Problem, maker: CaseMaker, device: str, interpreted: bool) -> list[Case]:
    """One fresh case of each check shape and dtype, from new secret seeds, the largest left out."""
    cases = []
    for dtype in problem.dtypes:
        for shape in problem.all_check_shapes():
            cases.append((shape, dtype, maker.inputs(shape, dtype, problem.distributions[0], fresh_seed())))
    smallest = min(nbytes(inputs) for _, _, inputs in cases)
    cases = [case for case in cases if nbytes(case[2]) <= max(CASE_BYTES, smallest)]
    if interpreted:  # the interpreter takes minutes on a benchmark shape: the shapes its checks ran on
        small = [case for case in cases if math.prod(case[0]) <= INTERPRETER_MAX_ELEMENTS]
        cases = small or cases[:1]
    return cases


def driver(module: str, entry: str, device: str) -> str:
    return f"MODULE = {module!r}\nENTRY = {entry!r}\nDEVICE = {device!r}\n" + DRIVER


def plain_check(problem: Problem, source: str, device: str, timeout: float) -> str | None:
    """None when the winner, run in a user's process on fresh cases of each check shape drawn after it was
    loaded, matches the reference; else the one-line reason it may not ship."""
    maker = CaseMaker(problem, device)
    interpreted = device == "cpu" and detect_backend(source) == "triton"
    state = None
    if problem.kind == "kernelbench":
        names, tensors = maker.state()
        state = {"init_args": maker.init_args, "weights": dict(zip(names, tensors))}
    module = identifier(problem.name)
    files = {
        f"{PACKAGE}/__init__.py": "",
        f"{PACKAGE}/_cpp.py": cpp_loader(PACKAGE),
        f"{PACKAGE}/{module}.py": rewrite_imports(source),
    }
    entry = "ModelNew" if problem.kind == "kernelbench" else "kernel"
    env = {"TRITON_INTERPRET": "1"} if interpreted else {}  # exported as verified under the interpreter
    try:
        with UserProcess(driver(f"{PACKAGE}.{module}", entry, device), files, timeout, env) as process:
            process.loaded()
            for _ in range(ROUNDS):
                cases = draw(problem, maker, device, interpreted)  # drawn only now: after the winner is loaded
                buffer = io.BytesIO()
                torch.save({"inputs": [inputs for _, _, inputs in cases], "state": state}, buffer)
                reply = process.ask(buffer.getvalue())
                wrong = judge(problem, maker, device, cases, reply)
                if wrong:
                    return wrong
    except UserProcessError as exc:
        return f"in a plain process it {exc}"
    return None


def judge(problem: Problem, maker: CaseMaker, device: str, cases: list[Case], reply: bytes) -> str | None:
    """Why the outputs of one round are wrong, or None."""
    try:
        outputs = torch.load(io.BytesIO(reply), weights_only=True)
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
