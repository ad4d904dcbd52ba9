"""Human review of accepted and flagged candidates: who decided what, and what may ship.

Why: a `flagged` verdict (an implausible speedup, a suspicious timing) is not a
rejection but a request for a human; it ships only after an explicit approve,
and a reject keeps even a `faster` candidate out of an export.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass

from kernel_agent.core.text import clean
from kernel_agent.core.verdict import Status
from kernel_agent.db import review_reads as rq
from kernel_agent.db.models import MEASUREMENTS, RETIME
from kernel_agent.db.session import Database

DECISIONS = ("approve", "reject")


class ReviewError(ValueError):
    """A review that cannot be recorded (unknown candidate, unknown decision): one line."""


@dataclass
class Recorded:
    candidate_id: int
    decision: str
    reviewer: str
    note: str


def current_reviewer() -> str:
    """$USER when set, else the login name; never empty."""
    name = os.environ.get("USER", "").strip()
    if not name:
        try:
            name = getpass.getuser()
        except Exception:  # noqa: BLE001 - no passwd entry in some containers
            name = ""
    return name or "unknown"


def record(db: Database, candidate_id: int, decision: str, note: str = "", reviewer: str | None = None) -> Recorded:
    """Store one decision; the latest decision per candidate is the one that counts."""
    if decision not in DECISIONS:
        raise ReviewError(f"unknown decision {decision!r}; use approve or reject")
    stored = rq.candidate_origin(db, candidate_id)
    if stored is None:
        raise ReviewError(f"no candidate {candidate_id} in this database; `kernel-agent candidates list` shows them")
    if stored[0] == RETIME:  # a measurement of its parent: a decision on it would ship nothing
        raise ReviewError(
            f"candidate {candidate_id} is a re-timing of candidate {stored[1]}, not a variant; review {stored[1]}"
        )
    who = clean(reviewer or current_reviewer(), 200)
    note = clean(note, 2000, keep_newlines=True).strip()  # argv and $USER may hold undecodable bytes
    rq.add_review(db, candidate_id, decision, who, note)
    return Recorded(candidate_id, decision, who, note)


def may_ship(record: rq.CandidateRecord, approved_only: bool = False) -> bool:
    """Whether a candidate may be exported: `faster` unless rejected, `flagged` only when approved."""
    decision = record.decision.decision if record.decision else None
    if record.status not in rq.SHIPPABLE or record.origin in MEASUREMENTS:
        return False
    if approved_only or record.status == Status.FLAGGED:
        return decision == "approve"
    return decision != "reject"


def queue(
    db: Database, run_id: int, kernel: str | None = None
) -> list[tuple[rq.KernelRecord, list[rq.CandidateRecord]]]:
    """What `review RUN` walks: each kernel with its accepted or flagged candidates, best first."""
    kernels = rq.run_kernels(db, run_id, [kernel] if kernel else None)
    return [(k, rq.reviewable(k)) for k in kernels]
