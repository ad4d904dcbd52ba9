"""Hand-written starting points: a problem folder's `candidates/*.py`, evaluated before any round.

A kernel engineer often has a first attempt already (the bundled examples ship one each). With
`optimize --seeds` those files are proposed in round 0, beside the baseline, through the same
evaluation as any candidate; an accepted one becomes a parent, so the search (or the LLM) starts
from it instead of the naive baseline. They are stored with origin `seed` and their file name.
"""

from __future__ import annotations

from kernel_agent.problem.load import Problem
from kernel_agent.propose.base import Proposal

ORIGIN = "seed"
FOLDER = "candidates"
MAX_SEED_BYTES = 1 << 20


def seed_proposals(problem: Problem) -> list[Proposal]:
    """One proposal per `candidates/*.py` of the problem's folder, by name; none for a single-file problem."""
    if not problem.path.is_dir():
        return []
    proposals = []
    for path in sorted((problem.path / FOLDER).glob("*.py")):
        note = f"seed {FOLDER}/{path.name}"
        try:
            if path.stat().st_size > MAX_SEED_BYTES:
                raise ValueError(f"larger than {MAX_SEED_BYTES} bytes")
            proposals.append(Proposal(path.read_text(), ORIGIN, note))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            proposals.append(Proposal(None, ORIGIN, note, parse_error=f"unreadable seed file: {exc}"))
    return proposals
