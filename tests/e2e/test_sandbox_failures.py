"""Ordinary failures a new user meets, answered with a verdict and its cause (issue 11, defects 3 and 4)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CANDIDATES, EXAMPLES, FIXTURES, ROOT, SOFTMAX, run_cli

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import load_problem


def test_a_kernelbench_file_in_a_private_folder_gets_a_verdict(tmp_path: Path) -> None:
    """A folder of mode 0700 (what `mktemp -d` makes) holding the problem and, below it, the work dirs:
    the baseline's sandbox used to be denied its own config there (every verdict `runtime_error`)."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    shutil.copy(FIXTURES / "kernelbench" / "kb_rowloop.py", private / "kb_rowloop.py")
    shutil.copy(FIXTURES / "kernelbench" / "kb_rowloop_new.py", private / "candidate.py")
    proc = run_cli(
        "eval", "kb_rowloop.py", "candidate.py", "--json", "--threads", "1", cwd=private, env={"PYTHONPATH": str(ROOT)}
    )
    verdict = json.loads(proc.stdout)
    assert verdict["status"] in ("faster", "correct"), verdict["reason"]
    assert not (private / "sandbox").exists() or not list((private / "sandbox").iterdir())


def test_a_worker_that_dies_names_its_last_error_line(tmp_path: Path) -> None:
    candidate = (
        "import os, sys\nsys.stderr.write('ValueError: the device table is missing row 7\\n')\nsys.stderr.flush()\n"
        "os._exit(3)\n"
    )
    verdict = evaluate(
        load_problem(FIXTURES / "softmax64"),
        candidate + "def kernel(x):\n    return x\n",
        EvalOptions(sandbox_root=tmp_path / "sandbox", threads=1),
    )
    assert verdict.status == "crashed"
    assert "worker exited (code 3) without answering" in verdict.reason
    assert "the device table is missing row 7" in verdict.reason


def test_a_worker_killed_by_a_signal_says_which_and_why(tmp_path: Path) -> None:
    source = (
        (FIXTURES / "candidates" / "segfault.py")
        .read_text()
        .replace("    load_library(", "    print('about to call crash()', flush=True)\n    load_library(")
    )
    verdict = evaluate(
        load_problem(FIXTURES / "softmax64"),
        source,
        EvalOptions(sandbox_root=tmp_path / "sandbox", threads=1, build_store=tmp_path / "store"),
    )
    assert verdict.status == "crashed", verdict.reason
    assert "SIGSEGV" in verdict.reason and "about to call crash()" in verdict.reason


def test_a_baseline_that_does_not_build_is_a_runtime_error_before_any_sandbox_starts(tmp_path: Path) -> None:
    """The baseline is built before either worker is launched (it is launched beside the candidate's): a
    problem whose own C++ does not compile ends `runtime_error` naming the baseline, and leaves nothing behind."""
    problem_dir = tmp_path / "broken"
    shutil.copytree(ROOT / "examples" / "cpp_softmax", problem_dir)
    kernel = problem_dir / "kernel.py"
    kernel.write_text(kernel.read_text().replace("#define ROW_BLOCK 1", "#define ROW_BLOCK 1\n#error broken baseline"))
    candidate = (ROOT / "examples" / "cpp_softmax" / "candidates" / "faster.py").read_text()
    sandbox = tmp_path / "sandbox"
    verdict = evaluate(load_problem(problem_dir), candidate, EvalOptions(sandbox_root=sandbox, threads=1))
    assert verdict.status == "runtime_error" and "the baseline failed to build" in verdict.reason, verdict.reason
    assert "sandbox_start" not in verdict.durations
    assert not list(sandbox.glob("*/")), "the evaluation's folder was not removed"


def _level_here(level: str) -> str:
    from kernel_agent.sandbox.host.levels import probe

    try:
        probe(level)
    except RuntimeError:
        pytest.skip(f"isolation level {level} is not available here")
    return level


WRONG = {  # one wrong candidate per problem format: each ends `incorrect` at its first check
    "cpp": ("cpp_softmax", EXAMPLES / "cpp_softmax", "candidates/faster.py", ("1.0f / s", "1.01f / s")),
    "torch": ("softmax64", SOFTMAX, None, None),
    "kernelbench": ("kb_rowloop.py", FIXTURES / "kernelbench" / "kb_rowloop.py", None, None),
}


def wrong_candidate(kind: str) -> str:
    if kind == "torch":
        return (CANDIDATES / "wrong_values.py").read_text()
    if kind == "kernelbench":
        return (FIXTURES / "kernelbench" / "kb_rowloop_new.py").read_text().replace("torch.tanh(", "torch.sigmoid(")
    _, folder, name, (old, new) = WRONG[kind]
    return (folder / name).read_text().replace(old, new)


@pytest.mark.parametrize("kind", sorted(WRONG))
@pytest.mark.parametrize("level", ["bwrap", "unshare", "process"])
def test_every_level_and_format_works_below_a_private_folder_under_umask_077(
    tmp_path: Path, level: str, kind: str
) -> None:
    """As root without bubblewrap (a GPU container), the sandbox uid could not pass a 0700 folder above the
    work dirs (a TemporaryDirectory: every H200 fixture crashed with PermissionError on cand.json), nor read
    trusted files written under umask 077. The problem and its work dirs below a 0700 folder, at each level, for
    a C++ problem (its trusted builds and the library placed for the worker), a PyTorch one and a KernelBench one."""
    name, source, _, _ = WRONG[kind]
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    (shutil.copytree if source.is_dir() else shutil.copy)(source, private / name)
    old = os.umask(0o077)
    try:
        verdict = evaluate(
            load_problem(private / name),
            wrong_candidate(kind),
            EvalOptions(
                sandbox_root=private / "sandbox",
                threads=1,
                isolation=_level_here(level),
                build_store=private / "store",
            ),
        )
    finally:
        os.umask(old)
    assert verdict.status == "incorrect", verdict.reason
    assert verdict.isolation.startswith(level)


@pytest.mark.parametrize("level", ["bwrap", "unshare", "process"])
def test_no_sandbox_outlives_an_orchestrator_killed_mid_verdict(tmp_path: Path, level: str) -> None:
    """`timeout` killed gpu-check's evals on the H200 and their unshare'd workers lived on, holding the GPU
    and the sandbox uid's process slots (the next sandbox failed: setpriv 'Resource temporarily unavailable')."""
    _level_here(level)
    sandbox = tmp_path / "sandbox"
    command = [sys.executable, "-m", "kernel_agent", "eval", str(SOFTMAX), str(CANDIDATES / "hangs.py")]
    command += ["--json", "--threads", "1", "--no-references", "--isolation", level, "--sandbox", str(sandbox)]
    proc = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "KERNEL_AGENT_TRACE": "1"},
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # the candidate's sandbox is running once verification has begun
        if "verification ..." in line:
            break
    time.sleep(1.0)
    sandboxed = _descendants(proc.pid)  # unshare/bwrap, setpriv, the workers: all started by the orchestrator
    assert sandboxed, "no sandboxed process seen while the verdict was under way"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _alive(sandboxed) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(sandboxed), f"left running: {_alive(sandboxed)}"


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _alive(pids: list[int]) -> list[int]:
    """Those of `pids` still running (a zombie has released everything but its entry)."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            alive.append(pid)
    return alive


def test_a_cuda_error_is_named_not_torchs_advice_after_it(tmp_path: Path) -> None:
    """On the H200 every crashed worker quoted 'CUDA kernel errors might be asynchronously reported...'."""
    candidate = (
        "import os, sys\nsys.stderr.write('RuntimeError: CUDA error: an illegal memory access was encountered\\n'"
        "'CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.\\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\\n')\nsys.stderr.flush()\n"
        "os._exit(1)\ndef kernel(x):\n    return x\n"
    )
    verdict = evaluate(
        load_problem(FIXTURES / "softmax64"), candidate, EvalOptions(sandbox_root=tmp_path / "sandbox", threads=1)
    )
    assert verdict.status == "crashed"
    assert "an illegal memory access was encountered" in verdict.reason, verdict.reason
