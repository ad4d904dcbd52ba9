"""sandbox/levels.py: each level that does not start says why, with the fix for that cause (issue 32)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kernel_agent.sandbox.host import levels
from kernel_agent.sandbox.host.isolation import Isolation
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
