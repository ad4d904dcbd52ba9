"""`kernel-agent doctor`: what this machine gives the tool and what is missing, each with its fix.

Users run the tool in GPU containers as root (often without user namespaces), on workstations as themselves,
and from a wheel; which isolation level, accounting and compilers they get depends on the machine, and a
verdict's `isolation` line alone does not say why a stronger level was not had. `survey()` looks, and
starts nothing that outlives it.
"""

from __future__ import annotations

from kernel_agent.doctor.record import Check
from kernel_agent.doctor.survey import survey

__all__ = ["Check", "survey"]
