"""Freezing and work accounting from outside a process (kernel_agent/sandbox/control.py), on real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from kernel_agent.sandbox.host.cgroups import Cgroup, cgroup_root
from kernel_agent.sandbox.host.control import ProcessControl

BUSY = textwrap.dedent("""
    import os, sys, threading, time
    def spin():
        x = 0
        while True:
            x += 1
    for _ in range(3):
        threading.Thread(target=spin, daemon=True).start()
    print("ready", flush=True)
    if "--fork" in sys.argv:
        time.sleep(0.5)  # after the trusted side recorded this process
        os.fork()
    spin()
""")


def start(cgroup: Cgroup | None, *args: str) -> tuple[subprocess.Popen[str], ProcessControl]:
    child = subprocess.Popen(
        [sys.executable, "-c", BUSY, *args],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=cgroup.join if cgroup else None,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    control = ProcessControl(child.pid, cgroup)
    control.adopt_worker()
    return child, control


METHODS = ["proc"] + (["cgroup"] if cgroup_root() is not None else [])


@pytest.mark.parametrize("method", METHODS)
def test_a_frozen_process_does_no_work_and_a_thawed_one_does(method: str) -> None:
    cgroup = Cgroup(cgroup_root(), "test") if method == "cgroup" else None
    child, control = start(cgroup)
    try:
        control.freeze()
        assert control.frozen
        before = control.usage()
        time.sleep(0.4)
        during = control.usage()
        assert during.cpu_ns - before.cpu_ns <= 10_000_000  # at most one clock tick of slack
        assert during.threads == 4  # the main thread and three native threads, seen from /proc
        assert during.processes == 1
        control.thaw()
        time.sleep(0.4)
        control.freeze()
        after = control.usage()
        assert (
            after.cpu_ns - during.cpu_ns >= 50_000_000
        )  # it ran while thawed (a loaded 2-core machine gives it little)
    finally:
        control.kill()
        child.wait(timeout=10)
        if cgroup is not None:
            cgroup.remove()


@pytest.mark.parametrize("method", METHODS)
def test_a_forked_process_is_counted_and_frozen_too(method: str) -> None:
    cgroup = Cgroup(cgroup_root(), "test") if method == "cgroup" else None
    child, control = start(cgroup, "--fork")
    try:
        time.sleep(1.0)
        control.freeze()
        usage = control.usage()
        assert usage.processes == 2
        time.sleep(0.3)
        assert control.usage().cpu_ns - usage.cpu_ns <= 10_000_000
    finally:
        control.kill()
        child.wait(timeout=10)
        if cgroup is not None:
            cgroup.remove()
    assert not any(
        os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z"
        for pid in control.untrusted()
    )
