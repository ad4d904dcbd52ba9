"""Which isolation levels start a process here, and for each that does not, why and the fix.

The probe keeps the strongest level that runs `/bin/true`; a user whose verdicts say `process` needs to know
whether bubblewrap is missing, user namespaces are off, AppArmor restricts them or a container's seccomp
profile forbids new namespaces, because each has another fix. `kernel-agent doctor` shows every level;
`eval` and `optimize` print `notice()` when they fall back.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kernel_agent.sandbox.host import device_fit
from kernel_agent.sandbox.host.isolation import (
    MB,
    SANDBOX_UID,
    Isolation,
    bwrap_prefix,
    mounts_prefix,
    needed_read_paths,
    package_dir,
    traversable,
    unshare_prefix,
)

ORDER = ("bwrap", "unshare", "process")  # strongest first


@dataclass(frozen=True)
class Attempt:
    """One level tried: the isolation it gives, or why it did not start and what would fix that."""

    level: str
    isolation: Isolation | None
    why: str = ""
    fix: str = ""

    @property
    def works(self) -> bool:
        return self.isolation is not None


def attempts(preferred: str = "auto") -> list[Attempt]:
    """The levels tried for `preferred` (auto: strongest first, up to the first that works)."""
    tried = []
    for level in ORDER if preferred == "auto" else (preferred,):
        tried.append(attempt(level))
        if tried[-1].works:
            break
    return tried


@functools.cache
def probe(preferred: str = "auto") -> Isolation:
    """The strongest layer that actually starts a process here (`attempts` tries them and says why one failed)."""
    tried = attempts(preferred)
    if tried[-1].isolation is None:
        why = f": {tried[-1].why}" + (f" (fix: {tried[-1].fix})" if tried[-1].fix else "")
        raise RuntimeError(f"isolation level {preferred!r} is not available on this machine{why}")
    return tried[-1].isolation


@functools.cache
def attempt(level: str) -> Attempt:
    """The level as it starts here, with the walls the machine's GPU still starts under (`device_fit`)."""
    tried = _start(level)
    if tried.isolation is None:
        return tried
    fitted, why = device_fit.fit(tried.isolation, device_fit.device_check())
    if fitted is None:
        return Attempt(level, None, why, "run `kernel-agent doctor` and report the line it gives for this level")
    return dataclasses.replace(tried, isolation=fitted)


def _start(level: str) -> Attempt:
    root = os.geteuid() == 0
    if level == "bwrap":
        return _bwrap(root)
    if level == "unshare":
        return _unshare(root)
    if level == "process":
        return _process(root)
    raise ValueError(f"unknown isolation level {level!r}")


def notice(tried: list[Attempt]) -> str | None:
    """One line when the level in force is weaker than bwrap, naming why each stronger one failed."""
    failed = [a for a in tried if not a.works]
    if not failed or not tried[-1].works:
        return None
    reasons = "; ".join(f"{a.level}: {a.why}" + (f", fix: {a.fix}" if a.fix else "") for a in failed)
    return f"isolation: {tried[-1].level}, weaker than {failed[0].level} ({reasons}); `kernel-agent doctor` shows more"


def unreachable(isolation: Isolation) -> str | None:
    """One line when, at the process level as root, the sandbox runs as root without capabilities because uid
    65534 cannot reach the interpreter, site-packages or this package (a private folder above them)."""
    if os.geteuid() != 0 or isolation.uid != 0 or isolation.level != "process":
        return None
    return (
        f"the sandbox uid {SANDBOX_UID} cannot reach {', '.join(_hidden())} at the process level (a folder above is "
        "private): the sandbox runs as root without capabilities, inside Landlock and seccomp; a venv every user can "
        "read (under /opt) lets it drop to an unprivileged uid"
    )


def _hidden() -> list[str]:
    return [str(p) for p in needed_read_paths() if not traversable(p)]


def _process(root: bool) -> Attempt:
    """A plain child; as root, uid 65534 where it can reach the interpreter, else root without capabilities where
    Landlock (ABI 6: signals scoped too) and seccomp keep it in, else no level: refused before any candidate."""
    layers = ("session", "env-allowlist", "rlimits")
    held = walls()
    if not root:
        return Attempt("process", Isolation("process", os.geteuid(), layers + held))
    hidden = _hidden()
    if not hidden:
        return Attempt("process", Isolation("process", SANDBOX_UID, layers + _setuid(root) + held))
    abi = next((int(layer.removeprefix("landlock-abi")) for layer in held if layer.startswith("landlock-abi")), 0)
    if abi >= 6 and "seccomp" in held:
        return Attempt("process", Isolation("process", 0, layers + ("no-capabilities",) + held))
    why = (
        f"the sandbox uid {SANDBOX_UID} cannot reach {', '.join(hidden)} (a folder above is private), and without "
        f"Landlock ABI 6 and seccomp (here: {', '.join(held)}) root cannot be kept in instead"
    )
    return Attempt("process", None, why, "install into a venv every user can read (under /opt), or bubblewrap")


@functools.cache
def walls() -> tuple[str, ...]:
    """The walls every worker raises around itself on this kernel (sandbox/inside/walls.py), as layers:
    ("landlock-abi7", "seccomp") here; found by raising them in a throwaway child, so the line names what holds.
    A worker that cannot raise what this names refuses to serve."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(package_dir().parent)}
    command = [sys.executable, "-P", "-s", "-B", "-m", "kernel_agent.sandbox.inside.walls"]
    try:
        done = subprocess.run(command, capture_output=True, timeout=60, text=True, env=env, cwd="/")
    except (OSError, subprocess.SubprocessError):
        return ("no-landlock", "no-seccomp")
    said = done.stdout.strip()
    if done.returncode != 0 or said.startswith("refused"):
        return ("no-landlock", "no-seccomp")
    return tuple(part.strip() for part in said.split(","))


def _setuid(root: bool) -> tuple[str, ...]:
    return ("setuid",) if root else ()


def _run(command: list[str]) -> tuple[bool, str]:
    try:
        done = subprocess.run(command, capture_output=True, timeout=20, text=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    return done.returncode == 0, (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]


def _bwrap(root: bool) -> Attempt:
    if not shutil.which("bwrap"):
        return Attempt("bwrap", None, NOT_INSTALLED, INSTALL_BWRAP)
    prefix = bwrap_prefix(Path("/"), extra_ro=(), gpu=False)
    works, said = _run(prefix + ["/bin/true"])
    if not works:
        why, fix = _namespaces_refused(root, said)
        return Attempt("bwrap", None, why, fix)
    # --size needs bubblewrap 0.7 or later; without it the disk bound is disk_overuse alone.
    sized, _ = _run(prefix + ["--size", str(MB), "--tmpfs", "/tmp", "/bin/true"])
    layers = ("minimal-root", "private-tmp", "no-net", "pid-ns", "env-allowlist", "rlimits")
    layers += ("scratch-tmpfs",) if sized else ()
    layers += _setuid(root) + walls()
    return Attempt("bwrap", Isolation("bwrap", SANDBOX_UID if root else os.geteuid(), layers))


def _unshare(root: bool) -> Attempt:
    if not shutil.which("unshare"):
        return Attempt("unshare", None, "unshare (util-linux) is not installed", "install util-linux")
    works, said = _run(unshare_prefix() + ["/bin/true"])
    if works:  # the minimal root too: a level that cannot build it is not this level
        works, said = _run(unshare_prefix() + mounts_prefix(Path("/"), (), (), False) + ["/bin/true"])
    if not works:
        why, fix = _namespaces_refused(root, said)
        return Attempt("unshare", None, why, fix)
    layers = ("mount-ns", "no-net", "pid-ns", *(() if root else ("user-ns",)), "env-allowlist", "rlimits")
    layers += _setuid(root) + walls()
    return Attempt("unshare", Isolation("unshare", SANDBOX_UID if root else os.geteuid(), layers))


NOT_INSTALLED = "bubblewrap is not installed, no bwrap on PATH"
INSTALL_BWRAP = "apt-get install bubblewrap, or dnf install bubblewrap"


def _namespaces_refused(root: bool, said: str) -> tuple[str, str]:
    """Why the kernel refused new namespaces, from the machine's settings, and the fix for that cause."""
    if not root:
        if _sysctl("user/max_user_namespaces") == "0":
            return "user namespaces are off (user.max_user_namespaces = 0)", "sysctl -w user.max_user_namespaces=15000"
        if _sysctl("kernel/unprivileged_userns_clone") == "0":
            return (
                "unprivileged user namespaces are off (kernel.unprivileged_userns_clone = 0)",
                "sysctl -w kernel.unprivileged_userns_clone=1",
            )
        if _sysctl("kernel/apparmor_restrict_unprivileged_userns") == "1":
            return (
                "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)",
                "an AppArmor profile that allows userns for /usr/bin/bwrap, or "
                "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
            )
    if in_container() and seccomp_filtered():
        return (
            f"the container forbids new namespaces (a seccomp filter, no CAP_SYS_ADMIN: {said})",
            "run the container with --cap-add SYS_ADMIN --security-opt seccomp=unconfined "
            "--security-opt apparmor=unconfined",
        )
    return f"the kernel refused it: {said}", ""


def _sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", name).read_text().strip()
    except OSError:
        return None


def in_container() -> bool:
    """Docker, Podman or Kubernetes, from the marks they leave."""
    if Path("/.dockerenv").exists() or Path("/run/.containerenv").exists() or os.environ.get("container"):
        return True
    try:
        return any(word in Path("/proc/1/cgroup").read_text() for word in ("docker", "kubepods", "containerd"))
    except OSError:
        return False


def seccomp_filtered() -> bool:
    """Whether a seccomp filter applies to this process (what Docker's default profile installs)."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return False
    return any(line.split() == ["Seccomp:", "2"] for line in status.splitlines())
