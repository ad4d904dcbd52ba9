"""The device ceilings every command uses: stored once per device fingerprint, measured the first time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kernel_agent.measure.ceilings import (
    Ceilings,
    ceilings_from_dict,
    ceilings_to_dict,
    fingerprint_key,
    measure_ceilings,
)

if TYPE_CHECKING:
    from kernel_agent.db.session import Database

Announce = Callable[[str], None]  # a line to show before a measurement of a few seconds


@dataclass(frozen=True)
class Found:
    ceilings: Ceilings
    origin: str  # where they came from, in words ("stored, measured ...", "measured now and stored", ...)


def ceilings_of(
    db: Database | None,
    device: str,
    threads: int | None,
    remeasure: bool = False,
    announce: Announce = lambda _: None,
    why_not_stored: str = "no database",
) -> Found:
    """This device fingerprint's ceilings: the stored ones unless `remeasure`, else measured now and stored (a
    concurrent run's, when it stored first, win: every run then reads the same). Without a database (`db` None,
    and `why_not_stored` says why) measured now and kept nowhere. Raises ProfileError when none can be measured."""
    if db is None:
        announce(f"measuring {device} ceilings ({why_not_stored}: not stored) ...")
        return Found(measure_ceilings(device, threads=threads), f"measured now, not stored ({why_not_stored})")
    from kernel_agent.db import writes as store

    key = fingerprint_key(device, threads)
    known = None if remeasure else store.stored_ceilings(db, key)
    if known is not None:
        found = ceilings_from_dict(known)
        return Found(found, f"stored, measured {found.measured_at}; --remeasure to refresh")
    announce(f"measuring {device} ceilings (stored for later runs) ...")
    store.store_ceilings(db, key, ceilings_to_dict(measure_ceilings(device, threads=threads)), replace=remeasure)
    return Found(ceilings_from_dict(store.stored_ceilings(db, key)), "measured now and stored")


def device_ceilings(db: Database, devices: set[str], threads: int | None, remeasure: bool) -> dict[str, Ceilings]:
    """Ceilings per device, each stored or measured now (a few seconds, before any evaluation starts)."""
    return {device: ceilings_of(db, device, threads, remeasure).ceilings for device in sorted(devices)}
