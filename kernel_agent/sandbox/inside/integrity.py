"""What the worker checks about its own process between requests: the timers, copy and compare functions,
backend flags and thread counts the candidate could patch, and the harness's own code. Only an early,
precise reason for the common in-process tricks; the trusted side's clock and accounting do not rest on it."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from kernel_agent.sandbox.inside.kernel_call import Violation


class Integrity:
    def __init__(self, torch: Any, device: str, harness: dict[str, Any]) -> None:
        self.torch = torch
        self.device = device
        self.harness = harness  # the worker's own code objects and functions, by name
        self.pristine = self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        torch = self.torch
        snap: dict[str, Any] = {
            "time.perf_counter": time.perf_counter,
            "time.perf_counter_ns": time.perf_counter_ns,
            "time.monotonic": time.monotonic,
            "time.time": time.time,
            "os.urandom": os.urandom,
            "torch.Tensor.clone": torch.Tensor.clone,
            "torch.Tensor.copy_": torch.Tensor.copy_,
            "torch.equal": torch.equal,
            "torch.set_num_threads": torch.set_num_threads,
            **{name: read() for name, read in self.harness.items()},
            "flag.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "flag.cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "flag.cudnn_benchmark": torch.backends.cudnn.benchmark,
            "flag.matmul_precision": torch.get_float32_matmul_precision(),
            "flag.deterministic": torch.are_deterministic_algorithms_enabled(),
            "threads": torch.get_num_threads(),
            "py_threads": threading.active_count(),
        }
        if self.device == "cuda":
            snap.update(
                {
                    "torch.cuda.synchronize": torch.cuda.synchronize,
                    "torch.cuda.Event": torch.cuda.Event,
                    "torch.cuda.Event.record": torch.cuda.Event.record,
                    "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
                }
            )
        return snap

    def check(self, when: str) -> None:
        now = self.snapshot()
        for key, value in self.pristine.items():
            if key == "py_threads":
                if now[key] > value:
                    raise Violation(
                        f"candidate started {now[key] - value} Python "
                        f"thread(s) ({when}); background work is not allowed"
                    )
            elif now[key] is not value and now[key] != value:
                raise Violation(f"harness tampering: {key} changed ({when})")
