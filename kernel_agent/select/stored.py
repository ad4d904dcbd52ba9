"""Everything a selector report needs, read from the database: a variant's ground truth on this device, the
problem's shape sets, and the context (tunables, cost model, device facts from the stored ceilings)."""

from __future__ import annotations

from dataclasses import dataclass

from kernel_agent.core.tuning import ConfigTime
from kernel_agent.db.session import Database
from kernel_agent.db.tuning import VariantKey, stored_times
from kernel_agent.problem.load import Problem
from kernel_agent.select.base import Context
from kernel_agent.select.device import device_facts
from kernel_agent.select.table import GroundTruth
from kernel_agent.tune.ground_truth import default_config
from kernel_agent.tune.space import ShapeSets, shape_sets


@dataclass(frozen=True)
class Stored:
    table: GroundTruth
    sets: ShapeSets
    context: Context
    ceilings_note: str


def load(
    db: Database, problem: Problem, variant: str, key: VariantKey, threads: int, rows: list[ConfigTime] | None = None
) -> Stored:
    """`rows`: the variant's stored rows when the caller has read them already."""
    import torch

    from kernel_agent.db.writes import stored_ceilings
    from kernel_agent.measure.ceilings import ceilings_from_dict

    rows = rows if rows is not None else stored_times(db, key)
    if not rows:
        raise ValueError(f"{problem.name}: no tuning rows for this variant on this device: run kernel-agent tune first")
    table = GroundTruth.from_rows(rows, default_config(problem, variant))
    known = stored_ceilings(db, key.fingerprint)
    ceilings = ceilings_from_dict(known) if known else None
    note = "stored ceilings" if ceilings else "no stored ceilings (kernel-agent profile --ceilings): rough defaults"
    size = torch.empty((), dtype=getattr(torch, key.dtype)).element_size()
    cost_model = dict(getattr(problem.module, "COST_MODEL", None) or {})
    context = Context(problem.tunables, device_facts(ceilings, threads, key.dtype), cost_model, size)
    return Stored(table, shape_sets(problem), context, note)
