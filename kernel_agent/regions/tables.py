"""What a `regions` run writes for people and for later runs: `regions.json` (every region, selected or not and
why; the captured values `--check` compares against) and `regions.md`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from kernel_agent.regions import rank
from kernel_agent.regions.graph import name
from kernel_agent.regions.outcome import Region, RegionsOutcome


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
        "binding": r.binding,
        "bind": r.bind,
        "trimmed_from": r.trimmed_from,
        "setup_ops": [name(first.cap.ops[i]) for i in first.prelude],
        "share": {k: [round(x, 4) for x in v] for k, v in r.share.items()},
        "share_hooks": {k: [round(x, 4) for x in v] for k, v in r.hook_share.items()},
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
        "threads": torch.get_num_threads(),  # what the shares were timed with: e2e's comparison names it
        "captures": o.captures,
        "axes": o.axes,
        "errors": o.errors,
        "timing": o.replay,
        "coverage": {k: round(v, 4) for k, v in o.coverage.items()},
        "coverage_interval": {k: [round(x, 4) for x in v] for k, v in o.coverage_interval.items()},
        "bound": {k: {s: _r(b) for s, b in v.items()} for k, v in o.bound.items()},
        "regions": [region_record(r, labels) for r in o.regions],
    }


def write_tables(o: RegionsOutcome, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    data = outcome_json(o)
    (out / "regions.json").write_text(json.dumps(data, indent=2) + "\n")
    (out / "regions.md").write_text(markdown(data) + "\n")
    lines = ["# kernel-agent regions: the emitted problems in rank order (kernel-agent optimize --manifest)", ""]
    for r in data["regions"]:
        if r["emitted"]:
            lines += ["[[kernel]]", f'path = "{r["folder"]}"', ""]
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
