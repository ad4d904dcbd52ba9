"""Stored, else measured now: what `eval`, `profile` and `optimize` read of this machine (a real SQLite file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernel_agent.db import writes as store
from kernel_agent.db.session import open_database
from kernel_agent.measure.ceilings import Ceilings, ceilings_to_dict, fingerprint_key
from kernel_agent.memo.ceilings import ceilings_of, device_ceilings
from kernel_agent.memo.references import reference_points
from kernel_agent.problem.load import load_problem

ROOT = Path(__file__).resolve().parents[3]


def stored(fingerprint: str) -> Ceilings:
    return Ceilings(fingerprint, "stored cpu", 12.5, {"float32": 80.0}, "2026-12-01T00:00:00+00:00")


def test_stored_ceilings_are_read_not_measured_again(tmp_path: Path) -> None:
    db = open_database(str(tmp_path / "runs.db"))
    key = fingerprint_key("cpu", 1)
    store.store_ceilings(db, key, ceilings_to_dict(stored(key)))
    said: list[str] = []
    found = ceilings_of(db, "cpu", 1, announce=said.append)
    assert found.ceilings == stored(key) and not said  # nothing measured: a measurement is announced
    assert found.origin == "stored, measured 2026-12-01T00:00:00+00:00; --remeasure to refresh"
    assert device_ceilings(db, {"cpu"}, 1, remeasure=False) == {"cpu": stored(key)}  # optimize reads the same


def test_without_a_measure_only_stored_reference_points_are_read(tmp_path: Path) -> None:
    """A finished kernel reads its points and measures none; nothing stored is nothing found."""
    db = open_database(str(tmp_path / "runs.db"))
    problem = load_problem(ROOT / "examples" / "cpp_softmax")
    from kernel_agent.evaluate.context import EvalOptions

    assert reference_points(db, problem, EvalOptions(threads=1), None) == {}
    assert reference_points(None, problem, EvalOptions(threads=1), None) == {}


def test_the_service_imports_no_database_package_until_given_a_database() -> None:
    """The GPU machine has no SQLAlchemy: eval and profile reach the service there and measure without storing."""
    code = (
        "import sys\n"
        "for name in ('sqlalchemy', 'alembic', 'openai'): sys.modules[name] = None\n"
        "import kernel_agent.memo.ceilings, kernel_agent.memo.references, kernel_agent.cli.ceilings\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
