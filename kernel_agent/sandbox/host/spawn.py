"""Start one sandboxed worker holding its protocol descriptors at the numbers the trusted side holds them at."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from kernel_agent.sandbox.protocol import WorkerFds


def spawn(
    command: list[str], fds: WorkerFds, env: dict[str, str], cwd: str, stderr_fd: int, setup: Callable[[], None]
) -> subprocess.Popen[bytes]:
    """Run `command --fds ...` with `fds` open in the child at the numbers the orchestrator holds them at;
    `setup` runs in the child before exec (limits, cgroups, affinity).

    Only descriptors this process owns are named in pass_fds: CPython makes each of them inheritable in
    the child before preexec_fn runs, so a number borrowed from whatever file happens to be open at fork
    time fails with EBADF whenever another thread has just closed it."""
    for fd in fds.passed():
        if fd <= 2:  # stdin, stdout and stderr are replaced in the child: never a protocol descriptor
            raise ValueError(f"descriptor {fd} would be replaced by the child's standard streams")
    return subprocess.Popen(
        [*command, "--fds", fds.arg()],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr_fd,
        pass_fds=fds.passed(),
        preexec_fn=setup,
        start_new_session=True,
    )
