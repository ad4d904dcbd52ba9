"""As root at the `unshare` level, the sandbox uid reads the trees it needs below a private folder, and nothing
else there (sandbox/host/mounts.py builds bwrap's minimal root): a root whose venv sat under a 0700 /root had
every evaluation crash at that level with `No module named 'torch'`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kernel_agent.sandbox.host.isolation import SANDBOX_UID, Isolation, wrap
from kernel_agent.sandbox.host.levels import probe

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox drops to another uid only as root")


def private_tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A 0700 folder holding a readable tree (what a venv under /root is) and a world-readable file beside it."""
    home = tmp_path / "home"
    tree = home / "project" / "venv" / "lib"
    tree.mkdir(parents=True)
    for folder in (home / "project", home / "project" / "venv", tree):
        os.chmod(folder, 0o755)
    os.chmod(home, 0o700)
    (tree / "torch.py").write_text("the tree the worker imports\n")
    (home / "project" / ".env").write_text("OPENAI_API_KEY=sk-beside-the-venv\n")
    for file in (tree / "torch.py", home / "project" / ".env"):
        os.chmod(file, 0o644)
    return home, tree.parent, home / "project" / ".env"


def sandboxed(command: list[str], level: str, extra: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        probe(level)
    except RuntimeError:
        pytest.skip(f"isolation level {level} is not available here")
    argv = wrap(command, Isolation(level, SANDBOX_UID), cwd, extra_ro=(extra,))
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=cwd)


def test_unshare_shows_the_needed_tree_below_a_private_folder_and_hides_the_rest(tmp_path: Path) -> None:
    home, venv, beside = private_tree(tmp_path)
    done = sandboxed(["cat", str(venv / "lib" / "torch.py")], "unshare", venv, Path("/"))
    assert done.returncode == 0 and done.stdout == "the tree the worker imports\n", done.stderr
    hidden = sandboxed(["cat", str(beside)], "unshare", venv, Path("/"))
    assert hidden.returncode != 0 and "sk-beside" not in hidden.stdout
    written = sandboxed(["touch", str(venv / "lib" / "planted.py")], "unshare", venv, Path("/"))
    assert written.returncode != 0 and not (venv / "lib" / "planted.py").exists()
    assert sorted(p.name for p in home.iterdir()) == ["project"]  # the host's folder is untouched


def test_the_process_level_cannot_and_says_nothing_else(tmp_path: Path) -> None:
    """No mount namespace there: the same read is refused, which `kernel-agent doctor` reports with its fix."""
    _, venv, _ = private_tree(tmp_path)
    done = sandboxed(["cat", str(venv / "lib" / "torch.py")], "process", venv, Path("/"))
    assert done.returncode != 0 and "Permission denied" in done.stderr
