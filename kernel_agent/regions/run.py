"""A whole `regions` run, from the recipe to the folder: capture each label, find and merge regions, select a
disjoint cut, write and check each selected region's problem, time the shares, write the tables.

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
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernel_agent.regions import emit, rank
from kernel_agent.regions.capture import CaptureError, capture, check_against_eager
from kernel_agent.regions.checks import CheckFailed, check_folder
from kernel_agent.regions.codegen import CodegenError, generate
from kernel_agent.regions.compiled import CompileReading, compile_speedup
from kernel_agent.regions.find import Instance, find_instances, module_depths, trimmed
from kernel_agent.regions.graph import categories, name
from kernel_agent.regions.program import Matched, build_program, find_axes, match, op_names, signature
from kernel_agent.regions.records import Capture

KIND_ORDER = {"horizontal": 0, "module": 1, "chain": 2, "epilogue": 3, "op": 4, "trimmed": 5}


@dataclass
class RegionsPlan:
    recipe: str
    size: str = "small"
    out: Path = Path("regions-out")
    granularity: str = "auto"
    top: int | None = None
    min_share: float = 0.0
    capture: str = "auto"
    rounds: int = 20
    weights: bool = False
    time_shares: bool = True
    index_dist: str = "uniform"  # or zipf:A, for the index inputs of embedding regions
    ceilings: Any = None  # measure.profile.Ceilings the CLI read from the database; None: measured here
    device: str = "cpu"  # where the shares are timed: cpu (host clock around each op) or cuda (kernel device time)
    compile: bool = False  # also time each emitted region's reference under torch.compile (--compile)


@dataclass
class Region:
    """A signature's instances across the model, and what became of it."""

    id: str
    kind: str
    slug: str
    cls: str
    instances: list[Matched]
    priority: int = 9
    selected: list[Matched] = field(default_factory=list)
    why: str = ""
    emitted: bool = False
    folder: str = ""
    share: dict[str, list[float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    flops: dict[str, int] = field(default_factory=dict)
    bytes: dict[str, int] = field(default_factory=dict)
    headroom: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    trimmed_from: str = ""  # for a trimmed region: the region whose free ops it is
    compiled: dict[str, CompileReading] = field(default_factory=dict)  # label -> torch.compile vs eager

    @property
    def ops(self) -> list[str]:
        return op_names(self.instances[0].programs[0])


@dataclass
class RegionsOutcome:
    recipe: str
    size: str
    granularity: str
    capture: str
    torch_version: str
    captures: list[dict[str, str]]
    axes: dict[str, list[int]]
    regions: list[Region]
    errors: list[str]
    replay: dict[str, dict[str, Any]]  # per label: the replayed and eager forward times, or why refused
    coverage: dict[str, float]
    bound: dict[str, dict[str, float | None]]
    coverage_interval: dict[str, list[float]] = field(default_factory=dict)


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


def run_regions(plan: RegionsPlan, progress: Callable[[str], None] = lambda _s: None) -> RegionsOutcome:
    from kernel_agent.prove.recipe import RecipeError, load_recipe

    errors: list[str] = []
    outcome = RegionsOutcome(
        plan.recipe, plan.size, plan.granularity, plan.capture, torch.__version__, [], {}, [], errors, {}, {}, {}
    )
    progress("building the recipe")
    try:
        case = load_recipe(plan.recipe, plan.size)
    except RecipeError as exc:
        errors.append(str(exc))
        _tables(outcome, plan.out)
        return outcome
    model = case.model.eval()
    caps: list[Capture] = []
    for label, inputs in case.inputs.items():
        progress(f"capturing {label}")
        try:
            cap = capture(model, inputs, label, plan.capture)
        except CaptureError as exc:
            errors.append(str(exc))
            continue
        differs = check_against_eager(model, inputs, cap)
        if differs:
            errors.append(differs)
            continue
        caps.append(cap)
        outcome.captures.append({"label": label, "mode": cap.mode, "why": cap.why, "ops": str(len(cap.ops))})
    if not caps:
        errors.append("no shape label could be captured: nothing to find regions in")
        _tables(outcome, plan.out)
        return outcome
    labels = [c.label for c in caps]
    axes = find_axes(caps)
    outcome.axes = {f"A{k}": list(t) for k, t in enumerate(axes)}
    if len(caps) < 2:
        errors.append("one shape label only: every size is a constant (give the recipe two labels whose sizes differ)")
    progress("finding regions")
    regions = _select(_regions(caps, plan.granularity), caps, axes)
    compute = _compute_dtype(model)
    out = plan.out
    (out / "problems").mkdir(parents=True, exist_ok=True)
    origin = {"recipe": plan.recipe, "size": plan.size, "torch": torch.__version__, "labels": labels}
    for region in regions:
        if not region.selected:
            continue
        progress(f"writing and checking {region.slug}_{region.id}")
        _emit(region, compute, axes, labels, origin, out, plan)
    if plan.time_shares:
        _time(regions, caps, case, plan, outcome, progress)
    _finish(regions, plan, outcome)
    if plan.compile:
        _compile_column(regions, labels, plan, progress)
    outcome.regions = regions
    _tables(outcome, out)
    return outcome


def _regions(caps: list[Capture], granularity: str) -> list[Region]:
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


def _select(regions: list[Region], caps: list[Capture], axes: list[tuple[int, ...]]) -> list[Region]:
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


def _compute_dtype(model: torch.nn.Module) -> str:
    counts: dict[str, int] = {}
    for p in model.parameters():
        if p.is_floating_point():
            key = str(p.dtype).removeprefix("torch.")
            counts[key] = counts.get(key, 0) + p.numel()
    return max(counts, key=lambda k: counts[k]) if counts else "float32"


def _binding(region: Region) -> str:
    """How the next step can swap a winner back: B1 a module's forward, B2 a parent of sibling modules, B3 a
    graph swap (a chain in a parent's code or crossing modules)."""
    if region.kind == "module":
        return "B1"
    if region.kind == "horizontal":
        return "B2"
    return "B3"


def _emit(
    region: Region, compute: str, axes: list, labels: list[str], origin: dict, out: Path, plan: RegionsPlan
) -> None:
    m = region.instances[0]
    try:
        code = generate(m, compute, plan.index_dist)
    except CodegenError as exc:
        region.why = f"selected, not emitted: {exc}"
        return
    shapes = [tuple(axes[a][k] for a in code.axes) for k in range(len(labels))]
    folder = out / "problems" / f"{region.slug}_{region.id}"
    inst = m.programs[0].instance
    description = (
        f"{region.kind} region {region.id}: {' '.join(region.ops[:8])}{' ...' if len(region.ops) > 8 else ''} "
        f"({len(region.selected)} instance(s), first {inst.path or 'the model'} {inst.cls.rsplit('.', 1)[-1]})"
    )
    text = emit.problem_text(
        region.id, region.slug, description, code, shapes, compute, f"{origin['recipe']} (size {origin['size']})"
    )
    meta = emit.region_json(
        m,
        {
            "id": region.id,
            "kind": region.kind,
            "binding": _binding(region),
            "instances_matched": region.selected,
            "shapes": dict(zip(labels, [list(s) for s in shapes])),
        },
        code,
        axes,
        origin,
    )
    params = None
    if plan.weights:
        params = {}
        for sm in region.selected:
            p = sm.programs[0]
            for v in p.inputs:
                val = p.cap.values[v]
                if val.source in ("param", "buffer"):
                    params[val.name] = p.cap.tensors[v]
    emit.write_problem(folder, text, emit.kernel_text(region.id, code), meta, params)
    captured = []
    for sm in region.selected:
        for p in sm.programs:
            captured.append(([p.cap.tensors[v] for v in p.inputs], [p.cap.tensors[v] for v in p.outputs]))
    try:
        region.warnings = check_folder(folder, captured)
    except CheckFailed as exc:
        region.why = f"selected, not emitted: {exc}"
        _remove(folder)
        return
    region.emitted = True
    region.folder = f"problems/{folder.name}"


def _remove(folder: Path) -> None:
    for f in sorted(folder.iterdir()):
        f.unlink()
    folder.rmdir()


def _time(
    regions: list[Region],
    caps: list[Capture],
    case: Any,
    plan: RegionsPlan,
    outcome: RegionsOutcome,
    progress: Callable[[str], None],
) -> None:
    from kernel_agent.measure.ceilings import measure_ceilings
    from kernel_agent.measure.roofline import roofline
    from kernel_agent.measure.work import WorkCounts

    ceilings = plan.ceilings
    if ceilings is None:
        progress("measuring this machine's ceilings")
        ceilings = measure_ceilings(plan.device, budget_s=1.0)
    timer = rank.time_capture_cuda if plan.device == "cuda" else rank.time_capture
    for k, cap in enumerate(caps):
        progress(f"timing {cap.label}: {plan.rounds} rounds of the replayed forward on {plan.device}")
        try:
            timing = timer(cap, case.model, case.inputs[cap.label], plan.rounds)
        except (RuntimeError, NotImplementedError) as exc:  # an op the device lacks, out of memory: one line
            outcome.errors.append(f"{cap.label}: timing on {plan.device} failed, no shares: {str(exc).splitlines()[0]}")
            continue
        ratio = timing.replay_s / max(timing.eager_s, 1e-12)
        outcome.replay[cap.label] = {
            "suspect": None
            if 0.5 <= ratio <= 2.0
            else f"the replayed forward took {ratio:.2f}x the eager forward's time: its shares may not be the model's",
            "replay_ms": round(timing.replay_s * 1e3, 3),
            "eager_ms": round(timing.eager_s * 1e3, 3),
            "refused": timing.refusal,
        }
        for region in regions:
            chosen = region.selected or region.instances
            ops = {i for m in chosen for i in m.programs[k].body}
            f, lo, hi = rank.share(timing, ops)
            region.seconds[cap.label] = rank.seconds(timing, ops)
            if timing.refusal is None:
                region.share[cap.label] = [f, lo, hi]
            counts = _work(chosen, k)
            region.flops[cap.label], region.bytes[cap.label] = counts
            floor = roofline(
                WorkCounts(counts[0] or None, counts[1], None, "flop_counter"), ceilings, "float32"
            ).floor_ms
            if floor and floor > 0:
                region.headroom[cap.label] = max(1.0, region.seconds[cap.label] * 1e3 / floor)
        if timing.refusal is None:
            # the share of the selected ops together, per round: a sum of per-region medians is not the median of
            # the sums, and on a loaded machine it falls short of the share the cut really holds
            union = {i for r in regions for m in r.selected for i in m.programs[k].body}
            if union:
                f, lo, hi = rank.share(timing, union)
                outcome.coverage[cap.label] = f
                outcome.coverage_interval[cap.label] = [lo, hi]


def _compile_column(
    regions: list[Region], labels: list[str], plan: RegionsPlan, progress: Callable[[str], None]
) -> None:
    for region in regions:
        if not region.emitted:
            continue
        progress(f"torch.compile of {region.slug}_{region.id}")
        for k, label in enumerate(labels):
            p = region.selected[0].programs[k]
            region.compiled[label] = compile_speedup(
                plan.out / region.folder, [p.cap.tensors[v] for v in p.inputs], plan.rounds
            )


def _work(chosen: list[Matched], k: int) -> tuple[int, int]:
    from torch.utils.flop_counter import FlopCounterMode

    flops = nbytes = 0
    for m in chosen:
        p = m.programs[k]
        env = {v: p.cap.tensors[v] for v in p.inputs}
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            for i in p.body:
                op = p.cap.ops[i]
                result = rank._fn(op.target)(*rank._real(op.args, env), **rank._real(op.kwargs, env))
                items = result if op.tuple_out else [result]
                for vid, item in zip(op.outputs, items):
                    if vid is not None:
                        env[vid] = item
        flops += counter.get_total_flops()
        nbytes += sum(p.cap.tensors[v].nbytes for v in p.inputs + p.outputs)
    return flops, nbytes


def _finish(regions: list[Region], plan: RegionsPlan, outcome: RegionsOutcome) -> None:
    """Rank by the bound at the roofline, apply --min-share and --top, sum the selected set's coverage."""
    labels = [c["label"] for c in outcome.captures]

    def key(r: Region) -> tuple:
        f = _mean_share(r, labels)
        h = min(r.headroom.values()) if r.headroom else None
        return (-(rank.amdahl(f, h) or 1.0) if f is not None else 0.0, -(f or 0.0), r.priority, r.id)

    regions.sort(key=key)
    emitted = [r for r in regions if r.emitted]
    for k, r in enumerate(emitted):
        f = _mean_share(r, labels)
        if f is not None and f < plan.min_share:
            r.emitted = False
            r.why = f"selected, not emitted: share {f:.1%} below --min-share {plan.min_share:.1%}"
        elif plan.top is not None and k >= plan.top:
            r.emitted = False
            r.why = f"selected, not emitted: past --top {plan.top}"
        if not r.emitted and r.folder:
            _remove(plan.out / r.folder)
            r.folder = ""
    for label in labels:
        chosen = [r for r in regions if r.selected and label in r.share]
        if not chosen:
            continue
        fs = [r.share[label][0] for r in chosen]
        if label in outcome.coverage and sum(fs) > 0:
            # the regions' medians apportion the set's own share, so the bounds agree with the coverage
            fs = [f * outcome.coverage[label] / sum(fs) for f in fs]
        hs = [r.headroom.get(label) for r in chosen]
        outcome.bound[label] = {
            "2x": rank.combined(fs, [2.0] * len(fs)),
            "roofline": rank.combined(fs, hs),
            "infinity": rank.combined(fs, [None] * len(fs)),
        }


def _mean_share(r: Region, labels: list[str]) -> float | None:
    values = [r.share[label][0] for label in labels if label in r.share]
    return sum(values) / len(values) if values else None


def region_record(r: Region, labels: list[str]) -> dict[str, Any]:
    first = r.instances[0].programs[0]
    return {
        "id": r.id,
        "kind": r.kind,
        "slug": r.slug,
        "class": r.cls,
        "ops": r.ops,
        "count": len(r.instances),
        "instances": [m.programs[0].instance.path for m in r.instances],
        "selected": len(r.selected),
        "status": r.why,
        "emitted": r.emitted,
        "folder": r.folder,
        "binding": _binding(r),
        "trimmed_from": r.trimmed_from,
        "setup_ops": [name(first.cap.ops[i]) for i in first.prelude],
        "share": {k: [round(x, 4) for x in v] for k, v in r.share.items()},
        "ms": {k: round(v * 1e3, 4) for k, v in r.seconds.items()},
        "flops": r.flops,
        "bytes": r.bytes,
        "headroom": {k: round(v, 2) for k, v in r.headroom.items()},
        "bound": {
            k: {
                "2x": _r(rank.amdahl(v[0], 2.0)),
                "roofline": _r(rank.amdahl(v[0], r.headroom.get(k))),
                "infinity": _r(rank.amdahl(v[0], None)),
            }
            for k, v in r.share.items()
        },
        "warnings": r.warnings,
        "compile": {
            k: {"speedup": _r(c.speedup), "interval": [_r(c.low), _r(c.high)], "reason": c.reason}
            for k, c in r.compiled.items()
        },
    }


def _compile_cell(readings: dict[str, dict[str, Any]]) -> str:
    cells = []
    for label, c in readings.items():
        if c["speedup"] is None:
            cells.append(f"{label}: no reading ({c['reason']})")
        else:
            cells.append(f"{label}: {c['speedup']:.2f}x [{c['interval'][0]:.2f}, {c['interval'][1]:.2f}]")
    return "; ".join(cells) or "-"


def _interval(data: dict[str, Any], label: str) -> str:
    lo_hi = data.get("coverage_interval", {}).get(label)
    return f" [{100 * lo_hi[0]:.1f}, {100 * lo_hi[1]:.1f}]" if lo_hi else ""


def _x(x: float | None) -> str:
    return f"{x:.3f}x" if x is not None else "unbounded"


def _r(x: float | None) -> float | None:
    return round(x, 4) if x is not None else None


def outcome_json(o: RegionsOutcome) -> dict[str, Any]:
    labels = [c["label"] for c in o.captures]
    return {
        "recipe": o.recipe,
        "size": o.size,
        "granularity": o.granularity,
        "capture": o.capture,
        "torch": o.torch_version,
        "captures": o.captures,
        "axes": o.axes,
        "errors": o.errors,
        "timing": o.replay,
        "coverage": {k: round(v, 4) for k, v in o.coverage.items()},
        "coverage_interval": {k: [round(x, 4) for x in v] for k, v in o.coverage_interval.items()},
        "bound": {k: {s: _r(b) for s, b in v.items()} for k, v in o.bound.items()},
        "regions": [region_record(r, labels) for r in o.regions],
    }


def _tables(o: RegionsOutcome, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    data = outcome_json(o)
    (out / "regions.json").write_text(json.dumps(data, indent=2) + "\n")
    (out / "regions.md").write_text(markdown(data) + "\n")
    lines = ["# kernel-agent regions: the emitted problems in rank order (kernel-agent optimize --manifest)", ""]
    for r in data["regions"]:
        if r["emitted"]:
            lines += ["[[kernel]]", f'name = "{r["slug"]}_{r["id"]}"', f'problem = "{r["folder"]}"', ""]
    (out / "kernels.toml").write_text("\n".join(lines))


def markdown(data: dict[str, Any]) -> str:
    labels = [c["label"] for c in data["captures"]]
    compiled = any(r.get("compile") for r in data["regions"])
    rows = [f"# Regions of {data['recipe']} (size {data['size']}, torch {data['torch']})", ""]
    for c in data["captures"]:
        rows.append(f"- {c['label']}: {c['mode']} capture, {c['ops']} ops ({c['why']})")
    for e in data["errors"]:
        rows.append(f"- error: {e}")
    for label, t in data["timing"].items():
        rows.append(
            f"- {label}: replayed forward {t['replay_ms']} ms, eager forward {t['eager_ms']} ms"
            + (f"; {t['suspect']}" if t.get("suspect") else "")
            + (f"; shares refused: {t['refused']}" if t["refused"] else "")
        )
    rows += [
        "",
        "| region | kind | count | "
        + " | ".join(f"share {x} [95%]" for x in labels)
        + " | headroom | bound 2x / roofline / inf"
        + (" | torch.compile vs eager [95%]" if compiled else "")
        + " | status |",
        "|" + "---|" * (6 + len(labels) + int(compiled)),
    ]
    for r in data["regions"]:
        shares = [
            "{:.1f}% [{:.1f}, {:.1f}]".format(*(100 * v for v in r["share"][x])) if x in r["share"] else "-"
            for x in labels
        ]
        b = r["bound"].get(labels[0], {}) if labels else {}
        bound = " / ".join(f"{b[k]:.3f}x" if b.get(k) else "-" for k in ("2x", "roofline", "infinity")) if b else "-"
        head = min(r["headroom"].values()) if r["headroom"] else None
        rows.append(
            f"| {r['slug']}_{r['id']} | {r['kind']} | {r['count']} | "
            + " | ".join(shares)
            + f" | {f'{head:.1f}x' if head else '-'} | {bound}"
            + (f" | {_compile_cell(r['compile'])}" if compiled else "")
            + f" | {r['status']} |"
        )
    rows.append("")
    for label in labels:
        if label in data["coverage"]:
            b = data["bound"][label]
            rows.append(
                f"- {label}: the selected set covers {data['coverage'][label]:.1%}{_interval(data, label)} of the "
                "forward; "
                f"model bound {_x(b['2x'])} at 2x, {_x(b['roofline'])} at the roofline, "
                f"{_x(b['infinity'])} at infinity"
            )
    return "\n".join(rows)


def captured_values(data: dict[str, Any]) -> tuple[dict[str, list], str | None]:
    """For `--check`: capture the recipe again as regions.json says it was, and give each region id the
    (inputs, outputs) of its instances per label; or the reason it cannot (the recipe no longer builds)."""
    from kernel_agent.prove.recipe import RecipeError, load_recipe

    try:
        case = load_recipe(data["recipe"], data["size"])
    except RecipeError as exc:
        return {}, str(exc)
    caps = []
    for label, inputs in case.inputs.items():
        try:
            caps.append(capture(case.model.eval(), inputs, label, data.get("capture", "auto")))
        except CaptureError as exc:
            return {}, str(exc)
    found: dict[str, list] = {}
    for region in _select(_regions(caps, data.get("granularity", "auto")), caps, find_axes(caps)):
        found[region.id] = [
            ([p.cap.tensors[v] for v in p.inputs], [p.cap.tensors[v] for v in p.outputs])
            for m in region.instances
            for p in m.programs
        ]
    return found, None
