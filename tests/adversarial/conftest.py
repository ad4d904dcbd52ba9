"""Makes `tests/adversarial/common.py` importable as `adversarial.common` from every test here."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


def pytest_sessionfinish(session, exitstatus) -> None:  # noqa: ANN001 - pytest's hook signature
    """With KERNEL_AGENT_ADVERSARIAL_TABLE=PATH, the verdicts this run observed become the table at PATH."""
    import os

    table = os.environ.get("KERNEL_AGENT_ADVERSARIAL_TABLE")
    if table and Path(f"{table}.records").exists():
        from adversarial.make_table import write_from_records

        write_from_records(Path(table))
