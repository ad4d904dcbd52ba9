"""The disjoint cut: candidate regions merged by signature across labels, then selected first come first served.

Why selection does not use the timings: the cut and the problem folders must come out byte for byte the same
on every run (their ids key the database and the package later), and shares on a shared machine move between
runs. The cut is structural (below); the timings rank what was cut and gate `--min-share` and `--top`.
Order of preference, first come first served on the ops (each op in at most one selected region):
1. modules one level above the leaves and horizontal groups a module holds exactly (attention, an MLP, the
   per-table embedding bags): the unit a layer swap replaces;
2. chains that cross module boundaries (a residual add and the next norm: no module holds them alone);
3. other horizontal groups (a model's own top-level embedding bags), then leaf modules (a norm, an output
   projection), anchor+epilogue chains, chains, and single ops.
"""

from __future__ import annotations

import hashlib

from kernel_agent.regions.find import Instance, find_instances, module_depths, trimmed
from kernel_agent.regions.graph import categories
from kernel_agent.regions.outcome import Region
from kernel_agent.regions.program import Matched, build_program, find_axes, match, op_names, signature
from kernel_agent.regions.records import Capture

KIND_ORDER = {"horizontal": 0, "module": 1, "chain": 2, "epilogue": 3, "op": 4, "trimmed": 5}


def _slug(kind: str, cls: str, ops: list[str]) -> str:
    core = [
        o
        for o in ops
        if o
        not in (
            "view",
            "_unsafe_view",
            "reshape",
            "transpose",
            "t",
            "unsqueeze",
            "to",
            "_to_copy",
            "alias",
            "expand",
            "slice",
            "flatten",
            "detach",
            "permute",
        )
    ]
    short = cls.rsplit(".", 1)[-1].lower()
    if kind == "module":
        return short or "module"
    head = "_".join(dict.fromkeys(core or ops))[:40]
    return f"{kind}_{head}"


def regions_of(caps: list[Capture], granularity: str) -> list[Region]:
    per_cap: list[dict[str, Instance]] = []
    cats_of = [categories(c) for c in caps]
    depths = module_depths(caps[0])
    module_ops: list[tuple[set[int], int]] = []
    for k, (cap, cats) in enumerate(zip(caps, cats_of)):
        chosen: dict[tuple[int, ...], Instance] = {}
        found = find_instances(cap, cats, granularity)
        if k == 0:
            module_ops = [(set(i.ops), depths.get(i.path, 9)) for i in found if i.kind == "module"]
        for inst in found:
            old = chosen.get(inst.ops)
            if old is None or KIND_ORDER[inst.kind] < KIND_ORDER[old.kind]:
                chosen[inst.ops] = inst
        per_cap.append({i.key: i for i in chosen.values()})
    axes = find_axes(caps)
    by_sig: dict[str, Region] = {}
    for key, inst in per_cap[0].items():
        if not all(key in pc for pc in per_cap):
            continue
        programs = [build_program(c, pc[key], cats) for c, pc, cats in zip(caps, per_cap, cats_of)]
        m = match(programs, axes)
        sig = signature(m) if m.problem is None else hashlib.sha256(("unmatched" + key).encode()).hexdigest()[:12]
        region = by_sig.get(sig)
        if region is None:
            ops = op_names(programs[0])
            region = Region(sig, inst.kind, _slug(inst.kind, inst.cls, ops), inst.cls, [])
            region.priority = _priority(inst, depths, module_ops)
            by_sig[sig] = region
        region.instances.append(m)
    return sorted(by_sig.values(), key=lambda r: (r.priority, min(r.instances[0].programs[0].body)))


def _priority(inst: Instance, depths: dict[str, int], module_ops: list[tuple[set[int], int]]) -> int:
    ops = set(inst.ops)
    inside_layer = any(ops <= m for m, d in module_ops if d <= 1)
    if inst.kind == "module" and depths.get(inst.path, 9) == 1:
        return 0
    if inst.kind == "horizontal" and any(ops == m for m, d in module_ops if d <= 1):
        return 0
    if inst.kind == "chain" and not inside_layer:
        return 1
    if inst.kind == "horizontal":
        return 2
    if inst.kind == "module" and depths.get(inst.path, 9) == 0:
        return 3
    return {"epilogue": 4, "chain": 5, "op": 6, "module": 8}[inst.kind]


def select(regions: list[Region], caps: list[Capture], axes: list[tuple[int, ...]]) -> list[Region]:
    """The disjoint cut, first come first served; a region partly overlapped by those selected before it
    offers its free ops as trimmed regions (placed right after it), re-derived and re-matched from scratch.
    Returns every region, the trimmed ones included."""
    taken: list[dict[int, str]] = [{} for _ in caps]
    cats_of = [categories(c) for c in caps]
    result: list[Region] = []
    for region in regions:
        result.append(region)
        first = region.instances[0]
        if first.problem is not None:
            region.why = f"not a problem: {first.problem}"
            continue
        if region.priority >= 8:
            region.why = "a module above the layers (its parts are regions of their own)"
            continue
        free, blocked, partial = [], set(), []
        for m in region.instances:
            hit = {taken[0][i] for i in m.programs[0].body if i in taken[0]}
            if hit:
                blocked |= hit
                partial.append(m)
            else:
                free.append(m)
        if free:
            _take(region, free, taken)
            region.why = "selected" + (
                f" ({len(free)} of {len(region.instances)} instances; the others overlap "
                + ", ".join(sorted(blocked))
                + ")"
                if blocked
                else ""
            )
        else:
            region.why = "overlaps " + ", ".join(sorted(blocked)) + " (selected first)"
        parts = _trimmed_regions(region, partial, caps, cats_of, taken, axes)
        for part in parts:
            _take(part, part.instances, taken)
            part.why = f"selected (the free ops of {region.slug}_{region.id}; the rest overlaps " + (
                ", ".join(sorted(blocked)) + ")"
            )
        if parts:
            region.why += "; its free ops: " + ", ".join(f"{p.slug}_{p.id}" for p in parts)
        result.extend(parts)
    return result


def _take(region: Region, chosen: list[Matched], taken: list[dict[int, str]]) -> None:
    region.selected = chosen
    for m in chosen:
        for k, p in enumerate(m.programs):
            for i in p.body:
                taken[k][i] = f"{region.slug}_{region.id}"


def _trimmed_regions(
    region: Region,
    partial: list[Matched],
    caps: list[Capture],
    cats_of: list[dict[int, str]],
    taken: list[dict[int, str]],
    axes: list[tuple[int, ...]],
) -> list[Region]:
    """The free parts of a region's overlapped instances, each matched across labels like any candidate; parts
    that do not match, are not a problem, or overlap a part already kept are dropped."""
    by_sig: dict[str, Region] = {}
    used: set[int] = set()
    for m in partial:
        per_label = [trimmed(p.instance, set(taken[k]), caps[k], cats_of[k]) for k, p in enumerate(m.programs)]
        if not per_label[0] or any(len(t) != len(per_label[0]) for t in per_label):
            continue
        for insts in zip(*per_label):
            if len({i.key for i in insts}) != 1 or used & set(insts[0].ops):
                continue
            programs = [build_program(caps[k], inst, cats_of[k]) for k, inst in enumerate(insts)]
            tm = match(programs, axes)
            if tm.problem is not None or not tm.programs[0].outputs or not tm.programs[0].inputs:
                continue
            used |= set(insts[0].ops)
            sig = signature(tm)
            part = by_sig.get(sig)
            if part is None:
                ops = op_names(programs[0])
                part = Region(sig, "trimmed", _slug("trimmed", insts[0].cls, ops), insts[0].cls, [])
                part.priority = region.priority
                part.trimmed_from = f"{region.slug}_{region.id}"
                by_sig[sig] = part
            part.instances.append(tm)
    return list(by_sig.values())
