"""A whole `regions` run, from the recipe to the folder: capture each label, find and merge regions, select a
disjoint cut, write and check each selected region's problem, time the shares, write the tables.

The cut is `cut.py` (structural, so every run writes the same folders); the tables are `tables.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernel_agent.regions import emit, rank
from kernel_agent.regions.bind import module_binding
from kernel_agent.regions.capture import CaptureError, capture, check_against_eager
from kernel_agent.regions.checks import CheckFailed, check_folder
from kernel_agent.regions.codegen import CodegenError, generate
from kernel_agent.regions.compiled import compile_speedup
from kernel_agent.regions.cut import regions_of, select
from kernel_agent.regions.outcome import Region, RegionsOutcome, RegionsPlan
from kernel_agent.regions.program import Matched, find_axes
from kernel_agent.regions.records import Capture
from kernel_agent.regions.tables import write_tables


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
        write_tables(outcome, plan.out)
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
        write_tables(outcome, plan.out)
        return outcome
    labels = [c.label for c in caps]
    axes = find_axes(caps)
    outcome.axes = {f"A{k}": list(t) for k, t in enumerate(axes)}
    if len(caps) < 2:
        errors.append("one shape label only: every size is a constant (give the recipe two labels whose sizes differ)")
    progress("finding regions")
    regions = select(regions_of(caps, plan.granularity), caps, axes)
    compute = _compute_dtype(model)
    out = plan.out
    (out / "problems").mkdir(parents=True, exist_ok=True)
    origin = {"recipe": plan.recipe, "size": plan.size, "torch": torch.__version__, "labels": labels}
    for region in regions:
        if not region.selected:
            continue
        if region.kind == "module":
            region.bind = module_binding(
                model, [m.programs[0] for m in region.selected], case.inputs[caps[0].label]
            ).to_json()
        progress(f"writing and checking {region.slug}_{region.id}")
        _emit(region, compute, axes, labels, origin, out, plan)
    emit.write_recipe(out, plan.recipe, plan.size)
    if plan.time_shares:
        _time(regions, caps, case, plan, outcome, progress)
    _finish(regions, plan, outcome)
    if plan.compile:
        _compile_column(regions, labels, plan, progress)
    outcome.regions = regions
    write_tables(outcome, out)
    return outcome


def _compute_dtype(model: torch.nn.Module) -> str:
    counts: dict[str, int] = {}
    for p in model.parameters():
        if p.is_floating_point():
            key = str(p.dtype).removeprefix("torch.")
            counts[key] = counts.get(key, 0) + p.numel()
    return max(counts, key=lambda k: counts[k]) if counts else "float32"


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
            "binding": region.binding,
            "instances_matched": region.selected,
            "shapes": dict(zip(labels, [list(s) for s in shapes])),
            "bind": region.bind,
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
        if timing.refusal is None and plan.device == "cpu":
            for region in regions:
                if region.kind == "module" and region.selected and region.bind.get("instances"):
                    modules = [case.model.get_submodule(i["module"]) for i in region.bind["instances"]]
                    f, lo, hi = rank.hook_share(case.model, modules, case.inputs[cap.label], plan.rounds)
                    region.hook_share[cap.label] = [f, lo, hi]
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
        f = r.mean_share(labels)
        h = min(r.headroom.values()) if r.headroom else None
        return (-(rank.amdahl(f, h) or 1.0) if f is not None else 0.0, -(f or 0.0), r.priority, r.id)

    regions.sort(key=key)
    emitted = [r for r in regions if r.emitted]
    for k, r in enumerate(emitted):
        f = r.mean_share(labels)
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
    for region in select(regions_of(caps, data.get("granularity", "auto")), caps, find_axes(caps)):
        found[region.id] = [
            ([p.cap.tensors[v] for v in p.inputs], [p.cap.tensors[v] for v in p.outputs])
            for m in region.instances
            for p in m.programs
        ]
    return found, None
