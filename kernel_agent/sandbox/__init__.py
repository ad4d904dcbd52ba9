"""The sandbox: a worker process per side, frozen between requests, spoken to over pipes and a sealed segment.

`host.session.WorkerSession` is the trusted side's handle on one worker (its process:
`host.process.SandboxProcess`); `inside.worker` is the module the sandboxed process runs. The worker imports
this package too, so this file imports nothing at start: the host's modules load only where they are used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["WorkerSession"]


def __getattr__(name: str) -> Any:
    """Import on first use: the worker process imports `kernel_agent.sandbox.inside.worker` alone."""
    if name in __all__:
        from kernel_agent.sandbox.host import session

        return getattr(session, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
