"""The device ceilings every command uses: stored once per device fingerprint, measured the first time.

`eval`, `optimize` and `profile` read the same ones, so the roofline floor that enters a verdict's
decision is the same whichever command evaluated the candidate.
"""

from __future__ import annotations

from typing import Any

from kernel_agent.cli.common import stderr, warn
from kernel_agent.cli.options import open_db


def profile_ceilings(db: str | None, device: str, threads: int | None, remeasure: bool) -> tuple[Any, str]:
    """The ceilings `optimize` uses for this device fingerprint (stored once in the database),
    and where they came from. Without the database packages (the GPU machine) they are
    measured now and not stored."""
    from kernel_agent.measure.ceilings import ceilings_from_dict, fingerprint_key, measure_ceilings
    from kernel_agent.measure.error import ProfileError

    try:
        try:
            from kernel_agent.db import writes as store
            from kernel_agent.optimize.run import device_ceilings as stored_or_measured
        except ImportError as exc:
            stderr.print(f"measuring {device} ceilings ({exc.name} is not installed: not stored) ...", highlight=False)
            return measure_ceilings(device, threads=threads), f"measured now, not stored ({exc.name} is not installed)"
        database = open_db(db)
        known = None if remeasure else store.stored_ceilings(database, fingerprint_key(device, threads))
        if known is not None:
            found = ceilings_from_dict(known)
            return found, f"stored, measured {found.measured_at}; --remeasure to refresh"
        stderr.print(f"measuring {device} ceilings (stored for later runs) ...", highlight=False)
        return stored_or_measured(database, {device}, threads, remeasure=remeasure)[device], "measured now and stored"
    except (ProfileError, RuntimeError, ValueError) as exc:
        warn(f"no ceilings: {exc}")
        return None, ""
