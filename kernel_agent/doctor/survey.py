"""Every check, in the order the table shows them."""

from __future__ import annotations

import tempfile
from pathlib import Path

from kernel_agent.doctor import host, sandbox, settings
from kernel_agent.doctor.record import Check


def survey(db: str | None = None, sandbox_root: Path = Path("sandbox"), preferred: str = "auto") -> list[Check]:
    from kernel_agent.cpp import default_store
    from kernel_agent.db.session import resolve_url, sqlite_path
    from kernel_agent.sandbox.host.isolation import reachable_root
    from kernel_agent.sandbox.host.levels import probe

    checks = sandbox.level_checks(preferred)
    try:
        isolation = probe(preferred)
    except RuntimeError:
        isolation = None
    if isolation is not None:
        checks += [sandbox.worker_python_check(isolation, sandbox_root), sandbox.memory_check(isolation)]
    checks += host.compiler_checks() + host.torch_checks() + host.gpu_checks()
    checks += host.cgroup_checks() + [host.huge_page_check(), host.cpu_line()]
    places = {"build store": default_store()}
    database = sqlite_path(resolve_url(db))
    if database is not None:
        places["database"] = database.parent
    if isolation is not None:
        places["work dirs"] = reachable_root(sandbox_root, isolation)
    places["temp dir"] = Path(tempfile.gettempdir())
    checks += host.disk_checks(places)
    checks += [settings.database_check(db), settings.llm_check()]
    return checks
