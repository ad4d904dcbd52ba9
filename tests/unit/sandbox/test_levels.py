"""sandbox/levels.py: each level that does not start says why, with the fix for that cause (issue 32)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kernel_agent.sandbox.host import levels
from kernel_agent.sandbox.host.isolation import Isolation, drop_privileges_prefix
from kernel_agent.sandbox.host.levels import Attempt, attempt, attempts, notice, probe


@pytest.fixture(autouse=True)
def fresh_probes() -> Iterator[None]:
    """Each test probes this machine anew (the probes are cached per process), and leaves no cache behind."""
    attempt.cache_clear()
    probe.cache_clear()
    yield
    attempt.cache_clear()
    probe.cache_clear()


def test_bubblewrap_missing_from_path_is_named_with_its_fix_and_the_next_level_is_used(
    no_bwrap_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", no_bwrap_path)
    tried = attempts("auto")
    assert tried[0] == Attempt(
        "bwrap",
        None,
        "bubblewrap is not installed, no bwrap on PATH",
        "apt-get install bubblewrap, or dnf install bubblewrap",
    )
    assert tried[-1].works and tried[-1].level in ("unshare", "process")
    line = notice(tried)
    assert line is not None and line.startswith(f"isolation: {tried[-1].level}, weaker than bwrap (bwrap: bubblewrap")
    with pytest.raises(RuntimeError, match="isolation level 'bwrap' is not available on this machine: bubblewrap is"):
        probe("bwrap")


@pytest.mark.parametrize(
    ("settings", "why", "fix"),
    [
        ({"user/max_user_namespaces": "0"}, "user.max_user_namespaces = 0", "sysctl -w user.max_user_namespaces"),
        ({"kernel/unprivileged_userns_clone": "0"}, "kernel.unprivileged_userns_clone = 0", "userns_clone=1"),
        (
            {"kernel/apparmor_restrict_unprivileged_userns": "1"},
            "AppArmor restricts unprivileged user namespaces",
            "an AppArmor profile that allows userns for /usr/bin/bwrap",
        ),
    ],
)
def test_a_user_refused_namespaces_is_told_which_setting_refused_them(
    monkeypatch: pytest.MonkeyPatch, settings: dict[str, str], why: str, fix: str
) -> None:
    monkeypatch.setattr(levels, "_sysctl", settings.get)
    said, fixed = levels._namespaces_refused(False, "setting up uid map: Permission denied")
    assert why in said and fix in fixed


def test_root_in_a_container_with_a_seccomp_filter_is_told_to_allow_namespaces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(levels, "in_container", lambda: True)
    monkeypatch.setattr(levels, "seccomp_filtered", lambda: True)
    said, fixed = levels._namespaces_refused(True, "unshare failed: Operation not permitted")
    assert "the container forbids new namespaces" in said and "Operation not permitted" in said
    assert "--cap-add SYS_ADMIN --security-opt seccomp=unconfined" in fixed


def test_nothing_is_said_at_the_strongest_level_or_when_a_named_level_works() -> None:
    works = Isolation("bwrap", os.geteuid())
    assert notice([Attempt("bwrap", works)]) is None
    assert notice([Attempt("process", Isolation("process", os.geteuid()))]) is None
    assert notice([Attempt("bwrap", None, "x", "y")]) is None  # nothing works: probe raises instead


def test_every_level_names_the_walls_this_kernel_holds() -> None:
    held = levels.walls()
    assert "seccomp" in held or "no-seccomp" in held
    for tried in (attempt(level) for level in levels.ORDER):
        if tried.works:
            assert set(held) <= set(tried.isolation.layers), tried.isolation.layers
            assert all(layer in tried.isolation.describe() for layer in held)


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox drops to another uid only as root")
@pytest.mark.parametrize(
    ("held", "uid"),
    [(("landlock-abi7", "seccomp"), 0), (("landlock-abi5", "seccomp"), None), (("no-landlock", "seccomp"), None)],
)
def test_root_with_a_private_interpreter_runs_confined_as_root_or_is_refused_with_the_fix(
    monkeypatch: pytest.MonkeyPatch, held: tuple[str, ...], uid: int | None
) -> None:
    """Stand-ins for a kernel this machine is not (older Landlock) and a venv below a 0700 folder."""
    monkeypatch.setattr(levels, "walls", lambda: held)
    monkeypatch.setattr(levels, "_hidden", lambda: ["/root/venv"])
    tried = levels._process(True)
    if uid is None:
        assert not tried.works and "cannot reach /root/venv" in tried.why and "/opt" in tried.fix
    else:
        assert tried.isolation.uid == 0 and "no-capabilities" in tried.isolation.layers
        assert "setpriv" in (command := drop_privileges_prefix(0)) and "--bounding-set=-all" in command
        assert not any(arg.startswith("--reuid") for arg in command)
