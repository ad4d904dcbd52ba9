"""A level's walls held to what the worker must run (device_fit): here a stand-in for CUDA's start, since this
machine has no GPU: a TCP socket, which seccomp refuses and nothing else at these levels does."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernel_agent.sandbox.host import device_fit
from kernel_agent.sandbox.host.levels import _start

NEEDS_A_SOCKET = "import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()"


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def started(level: str):
    tried = _start(level)
    if tried.isolation is None or "seccomp" not in tried.isolation.layers:
        pytest.skip(f"{level} with seccomp does not start here: {tried.why or tried.isolation}")
    return tried.isolation


@pytest.mark.parametrize("level", ["bwrap", "unshare"])
def test_a_wall_the_workload_cannot_run_under_is_dropped_and_named(level: str) -> None:
    isolation = started(level)
    assert not device_fit.runs(isolation, NEEDS_A_SOCKET)[0]  # the wall does refuse it
    fitted, why = device_fit.fit(isolation, NEEDS_A_SOCKET)
    assert fitted is not None, why
    assert "seccomp" not in fitted.layers and any(x.startswith("no-seccomp (") for x in fitted.layers)
    assert [x for x in fitted.layers if x.startswith("landlock-abi")] == [
        x for x in isolation.layers if x.startswith("landlock-abi")
    ]  # only what broke it goes
    assert device_fit.runs(fitted, NEEDS_A_SOCKET)[0]


def test_what_runs_under_every_wall_keeps_them_all_and_nothing_is_checked_without_a_gpu() -> None:
    isolation = started("unshare")
    assert device_fit.fit(isolation, "print('ok')") == (isolation, "")
    assert device_fit.fit(isolation, None) == (isolation, "")


def test_a_workload_that_runs_under_no_walls_refuses_the_level_with_its_line() -> None:
    fitted, why = device_fit.fit(started("unshare"), "raise SystemExit('no device here')")
    assert fitted is None and "no device here" in why


def test_the_result_is_kept_and_read_back(tmp_path: Path) -> None:
    isolation = started("unshare")
    device_fit.fit(isolation, NEEDS_A_SOCKET)
    kept = (tmp_path / "cache" / "kernel-agent" / "device-fit.json").read_text()
    assert kept.count("seccomp") >= 2  # the full set (refused) and the one without it (ran)
