"""Stale sandbox cgroups are told from live ones by the PID of the orchestrator that made them."""

from __future__ import annotations

import os
import subprocess
import sys

from kernel_agent.evaluate.sandbox.control import _owner_alive, group_name


def test_a_group_of_a_live_orchestrator_is_kept() -> None:
    name = group_name("candidate")
    assert name.startswith(f"candidate-{os.getpid()}-")
    assert _owner_alive(name)


def test_a_group_whose_orchestrator_is_gone_or_unnamed_is_stale() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not _owner_alive(f"candidate-{gone.pid}-0123abcd")
    assert not _owner_alive("candidate-0123abcd")  # the older naming carried no PID
