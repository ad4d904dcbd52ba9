"""doctor/sandbox.py: each level's row says what its walls keep out, from the layers the level records."""

from __future__ import annotations

from kernel_agent.doctor.sandbox import keeps_out
from kernel_agent.sandbox.host.isolation import Isolation
from kernel_agent.sandbox.host.levels import Attempt


def row(level: str, *layers: str) -> str:
    return keeps_out(Attempt(level, Isolation(level, 65534, layers)))


def test_each_wall_is_named_with_what_it_keeps_out() -> None:
    said = row("unshare", "mount-ns", "no-net", "setuid", "landlock-abi7", "seccomp")
    assert "own mount namespace" in said and "own network namespace" in said and "(seccomp)" in said
    assert "TCP, signals and abstract sockets outside (Landlock ABI 7)" in said


def test_older_landlock_names_less_and_none_says_so() -> None:
    assert "TCP" not in row("process", "landlock-abi3", "seccomp")
    assert "TCP" in row("process", "landlock-abi4", "seccomp") and "signals" not in row("process", "landlock-abi4")
    assert "no Landlock on this kernel" in row("process", "no-landlock", "seccomp")
    assert "mount namespace" not in row("process", "landlock-abi7")
