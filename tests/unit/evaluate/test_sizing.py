"""An evaluation's refusal for size asks whether the problem fits the host alone, not beside what runs now.

The level-1 batch refused level1/70 (19.95 GB needed) against the 17.09 GB MemAvailable read while another
evaluation held memory. Filling this machine's memory for real is not something a unit test can do, so the
host's available memory is a stand-in here; the problem and its footprint are real."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES

from kernel_agent.core.verdict import StatusError
from kernel_agent.evaluate import pipeline
from kernel_agent.evaluate.device_lock import DeviceGate
from kernel_agent.evaluate.pipeline import EvalOptions, Evaluation
from kernel_agent.problem.footprint import largest_footprint
from kernel_agent.problem.load import load_problem

RELU256 = FIXTURES / "large" / "relu256"


def test_a_problem_that_fits_the_idle_host_is_not_refused_while_another_evaluation_holds_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = load_problem(RELU256)
    needed = largest_footprint(problem).needed_without_gold
    reading = {"now": needed // 2}
    monkeypatch.setattr(pipeline, "available_bytes", lambda: reading["now"])
    gate = DeviceGate()
    options = EvalOptions(sandbox_root=tmp_path, gate=gate)
    with pytest.raises(StatusError, match="too large for this machine"):  # the host alone is too small
        Evaluation(problem, "", options)._size()
    reading["now"] = 4 * needed
    with gate.host_memory(needed, pipeline.available_bytes):  # another evaluation books while the host is idle
        reading["now"] = needed // 2  # ... and its processes take most of the memory
        assert Evaluation(problem, "", options)._size() >= needed  # sized against the idle host: booked, waits
    reading["now"] = needed // 2
    with pytest.raises(StatusError, match="too large for this machine"):  # alone again, the host is small
        Evaluation(problem, "", options)._size()
