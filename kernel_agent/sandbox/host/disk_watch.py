"""The sandbox's writes on the host's disk, watched from outside: its log always (it lives on the host disk,
no tmpfs bounds it), the whole work dir where no scratch tmpfs bounds the rest. Past the quota the sandbox
is killed and the reason kept for its verdict."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from kernel_agent.sandbox.host.isolation import Isolation, disk_overuse

LOG_LIMIT_BYTES = 64 << 20  # what the kernel prints: a flood is stopped here, not at RLIMIT_FSIZE (2 GiB)
DISK_CHECK_S = 0.25  # how often the watchdog looks


class DiskWatch:
    def __init__(self, workdir: Path, tag: str, isolation: Isolation, disk_bytes: int) -> None:
        self.log = workdir / f"{tag}.log"
        self.workdir = workdir
        self.isolation = isolation
        self.disk_bytes = disk_bytes
        self.reason: str | None = None  # set once the sandbox wrote past its quota
        self._stopped = threading.Event()

    def over(self) -> str | None:
        """Why the sandbox's writes are over quota now (and from then on), else None."""
        if self.reason is None:
            self.reason = self._look()
        return self.reason

    def start(self, kill: Callable[[], None]) -> None:
        """Look every DISK_CHECK_S in a thread; `kill` the sandbox once it is over quota."""

        def watch() -> None:
            while not self._stopped.is_set():
                if self.over():
                    kill()
                    return
                time.sleep(DISK_CHECK_S)

        threading.Thread(target=watch, name="disk-watchdog", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()

    def _look(self) -> str | None:
        try:
            logged = os.stat(self.log).st_size
        except OSError:
            logged = 0
        if logged > LOG_LIMIT_BYTES:
            return (
                f"disk quota of {LOG_LIMIT_BYTES >> 20} MB for the kernel's "
                f"printed output exceeded: {logged >> 20} MB written"
            )
        if not self.isolation.scratch_tmpfs:
            return disk_overuse(self.workdir, self.disk_bytes, self.isolation.uid)
        return None
