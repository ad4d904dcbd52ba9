"""A kernel's loop on a device its run named (optimize/kernel_loop.py `missing_device`): never evaluated anywhere
else. The CUDA case is exercised here without a GPU by telling torch there is, or is not, one."""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kernel_agent.core.verdict import Refusal, RefusalKind, Status, Verdict
from kernel_agent.db.reads import run_detail
from kernel_agent.db.session import open_database
from kernel_agent.db.writes import create_run
from kernel_agent.evaluate.pipeline import EvalOptions
from kernel_agent.optimize.kernel_loop import KernelLoop, LoopOptions, Shared, missing_device
from kernel_agent.optimize.search_state import KernelStatus
from kernel_agent.problem.load import load_problem
from kernel_agent.propose.search import SearchProvider

SOFTMAX = Path(__file__).resolve().parents[2] / "fixtures" / "softmax64"


@pytest.mark.parametrize("cuda_here", [False, True])
def test_a_named_device_is_missing_only_when_the_kernel_would_run_elsewhere(
    monkeypatch: pytest.MonkeyPatch, cuda_here: bool
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_here)
    cpu_problem = SimpleNamespace(name="cpp_softmax", device="cpu")
    gpu_problem = SimpleNamespace(name="triton_softmax", device="cuda")
    for problem in (cpu_problem, gpu_problem):
        assert missing_device(problem, "auto") == ""  # auto picks a device that is here
        assert missing_device(problem, "cpu") == ""  # a CUDA problem on the CPU: the Triton interpreter, as before
    if cuda_here:
        assert missing_device(gpu_problem, "cuda") == ""
        assert (
            missing_device(cpu_problem, "cuda") == "cpp_softmax runs on the cpu only (its problem sets DEVICE = 'cpu')"
        )
    else:
        assert (
            missing_device(gpu_problem, "cuda")
            == missing_device(cpu_problem, "cuda")
            == ("no CUDA device is visible here")
        )


class Refusing:
    """An executor that fails the test if anything is submitted to it."""

    workers = 1

    def submit(self, problem, source, options) -> Future:  # noqa: ANN001 - the Executor protocol's types
        raise AssertionError(f"evaluated {problem.name} on a device its run did not name ({options.device})")

    def shutdown(self) -> None:
        pass


def test_a_kernel_on_a_missing_device_ends_with_the_reason_stored_and_nothing_evaluated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    db = open_database(str(tmp_path / "runs.db"))
    run_id, problem = create_run(db, "search", None, {}), load_problem(SOFTMAX)
    events: list[tuple[str, dict]] = []
    options = LoopOptions(eval=EvalOptions(device="cuda", threads=1))
    loop = KernelLoop(
        db,
        run_id,
        problem,
        SearchProvider(),
        options,
        lambda kind, data: events.append((kind, data)),
        Shared(executor=Refusing()),
        "softmax64 (cuda)",
    )
    result = loop.run()
    assert (result.status, result.reason, result.device) == (
        KernelStatus.NO_DEVICE,
        "no CUDA device is visible here",
        "cuda",
    )
    assert events == [("done", {"kernel": "softmax64 (cuda)", "status": "no_device", "speedup": None, "cell": "-"})]
    (kernel,) = run_detail(db, run_id)["kernels"]
    assert (kernel["device"], kernel["status"], kernel["reason"], kernel["statuses"]) == (
        "cuda",
        "no_device",
        "no CUDA device is visible here",
        {},
    )
    # A resume returns the stored ending without looking at the device again.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    again = KernelLoop(db, run_id, problem, SearchProvider(), options, shared=Shared(executor=Refusing()))
    assert again.recorder.run_kernel_id == loop.recorder.run_kernel_id
    assert (again.run().status, again.state.name) == (KernelStatus.NO_DEVICE, "softmax64")
    assert run_detail(db, run_id)["kernels"][0]["reason"] == "no CUDA device is visible here"  # not redone


class Queued:
    """An executor whose evaluation waited `queued` seconds for a free worker, then was refused for size
    in `took` seconds of its own: the refusal a batch of KernelBench files meets behind two busy workers."""

    workers = 1

    def __init__(self, queued: float, took: float) -> None:
        self.queued, self.took = queued, took

    def submit(self, problem, source, options) -> Future:  # noqa: ANN001 - the Executor protocol's types
        time.sleep(self.queued)
        verdict = Verdict(
            status=Status.REJECTED,
            reason="too large for this machine: one call's working set 99 GB",
            refusal=Refusal(RefusalKind.TOO_LARGE, 99 << 30, 16 << 30, "host"),
        )
        verdict.durations = {"size": self.took, "memory_wait": 0.0}
        future: Future = Future()
        future.set_result(verdict)
        return future

    def shutdown(self) -> None:
        pass


def test_an_evaluation_row_stores_its_own_time_not_its_wait_for_a_worker(tmp_path: Path) -> None:
    db = open_database(str(tmp_path / "runs.db"))
    run_id, problem = create_run(db, "search", None, {}), load_problem(SOFTMAX)
    options = LoopOptions(eval=EvalOptions(device="cpu", threads=1))
    loop = KernelLoop(db, run_id, problem, SearchProvider(), options, shared=Shared(executor=Queued(0.3, 0.02)))
    assert loop.run().status == KernelStatus.TOO_LARGE
    with sqlite3.connect(tmp_path / "runs.db") as con:
        (seconds,) = con.execute("select duration_s from evaluations").fetchone()
    assert seconds == pytest.approx(0.02)  # the wait of 0.3 s in the queue is not the refusal's time
