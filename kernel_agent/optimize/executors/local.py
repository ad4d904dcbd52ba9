"""Where evaluations run: an executor takes (problem, source, options) and returns a future verdict.

`LocalExecutor` runs evaluations on a bounded thread pool in this process (each
evaluation's untrusted work is in its own sandboxed processes; the threads only
wait on them). A `DeviceGate` shared by all its evaluations keeps timed runs
alone on their device while compiles and checks overlap. A cluster executor
(Ray) implements the same two methods.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Protocol

import torch

from kernel_agent.core.verdict import Verdict
from kernel_agent.evaluate.device_lock import DeviceGate
from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import Problem


class Executor(Protocol):
    workers: int

    def submit(self, problem: Problem, source: str, options: EvalOptions) -> Future[Verdict]: ...

    def shutdown(self) -> None: ...


def default_workers() -> int:
    """One per visible GPU; on a CPU, two (one compiling or checking while the other is timed)."""
    if torch.cuda.is_available():
        return torch.cuda.device_count()
    return 2 if (os.cpu_count() or 1) >= 2 else 1


class LocalExecutor:
    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or default_workers()
        self.gate = DeviceGate()
        self.pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="evaluation")

    def submit(self, problem: Problem, source: str, options: EvalOptions) -> Future[Verdict]:
        return self.pool.submit(evaluate, problem, source, replace(options, gate=self.gate))

    def shutdown(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
