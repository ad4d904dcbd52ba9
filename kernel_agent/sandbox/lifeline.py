"""A sandboxed process dies with the one that started it. Standard library only: the worker sets it before its
walls, before anything that could start a thread is imported (`inside/start.py`)."""

from __future__ import annotations

import ctypes

try:  # looked up at import: after a fork in a threaded parent, dlopen's locks may be held
    _PRCTL = ctypes.CDLL(None).prctl
except (OSError, AttributeError):
    _PRCTL = None


def die_with_parent() -> None:
    """SIGKILL this process when the thread that started it dies (PR_SET_PDEATHSIG): an orchestrator
    killed by `timeout` or the OOM killer leaves no sandbox behind holding the GPU and the uid's process
    slots. A change of uid clears it, so the worker sets it again after setpriv."""
    if _PRCTL is not None:
        _PRCTL(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
