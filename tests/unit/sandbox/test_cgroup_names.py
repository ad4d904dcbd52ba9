"""Stale sandbox cgroups are told from live ones by the PID of the orchestrator that made them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import kernel_agent
from kernel_agent.sandbox.host.cgroups import _owner_alive, group_name, make_parent
from kernel_agent.sandbox.host.isolation import traversable

OTHER_UID = 65534 if os.geteuid() != 65534 else 65533
PYTHONS = [Path(p).resolve() for p in (sys.executable, "/usr/bin/python3") if Path(p).exists()]  # stdlib is enough


def test_a_group_of_a_live_orchestrator_is_kept() -> None:
    name = group_name("candidate")
    assert name.startswith(f"candidate-{os.getpid()}-")
    assert _owner_alive(name)


def test_a_group_whose_orchestrator_is_gone_or_unnamed_is_stale() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not _owner_alive(f"candidate-{gone.pid}-0123abcd")
    assert not _owner_alive("candidate-0123abcd")  # the older naming carried no PID


def test_the_shared_parent_is_listable_whatever_the_umask_of_the_run_that_made_it(tmp_path) -> None:
    """A root run under umask 077 made a 0700 parent, and a later user's run died listing it (CI, stop 43)."""
    old = os.umask(0o077)
    try:
        make_parent(tmp_path / "kernel-agent")
    finally:
        os.umask(old)
    assert (tmp_path / "kernel-agent").stat().st_mode & 0o777 == 0o755
    make_parent(tmp_path / "kernel-agent")  # an existing one is left as it is


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a folder another uid cannot list")
def test_a_parent_another_user_cannot_list_is_passed_over(tmp_path) -> None:
    """As an unprivileged uid, with a root-owned 0700 `kernel-agent` parent in every hierarchy, the stale-group
    sweep and the groups a sandbox gets fall back instead of raising."""
    root = Path(tempfile.mkdtemp(prefix="ka-cgroups-", dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        for controller in ("cpuset", "pids", "memory", "freezer"):
            (root / controller / "kernel-agent").mkdir(parents=True)
            os.chmod(root / controller, 0o755)
            os.chmod(root / controller / "kernel-agent", 0o700)
        package = Path(kernel_agent.__file__).resolve().parents[1]
        python = next((p for p in PYTHONS if traversable(p.parent) and p.stat().st_mode & 0o001), None)
        if not traversable(package) or python is None:
            pytest.skip(f"{package} or a Python is not reachable by uid {OTHER_UID}")
        script = (
            f"import sys; sys.path.insert(0, {str(package)!r})\n"
            "from pathlib import Path\n"
            "from kernel_agent.sandbox.host import cgroups\n"
            f"cgroups.V1_ROOT = Path({str(root)!r})\n"
            "cgroups.clean_stale_cgroups()\n"
            "from kernel_agent.sandbox.host.groups import SandboxGroups\n"
            "groups = SandboxGroups('candidate', {0}, 1 << 30)\n"
            "print(groups.freezer().name, groups.cores(), len(groups.joined()))\n"
        )
        done = subprocess.run(
            [str(python), "-c", script], user=OTHER_UID, cwd="/", capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr[-2000:]
        name, cores = done.stdout.split()[0], done.stdout.split()[-2]
        assert name == "SIGSTOP" and cores == "affinity", done.stdout
    finally:
        shutil.rmtree(root)
