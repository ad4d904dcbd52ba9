"""Charts as inline SVG (matplotlib, Agg): no image files, no data: URLs, nothing to fetch.

Why SVG inline: the report must open offline as one file, and inline SVG
makes no request at all, so the browser test can demand zero network traffic.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402 - after choosing the backend

from kernel_agent.core.of_record import PENDING, NumberOfRecord  # noqa: E402
from kernel_agent.core.verdict import Status
from kernel_agent.db.models import BASELINE, MEASUREMENTS  # noqa: E402
from kernel_agent.db.review_reads import CandidateRecord, KernelRecord  # noqa: E402

STATUS_COLORS = {"faster": "#1a7f37", "flagged": "#bf8700", "correct": "#0969da"}


def _svg(figure: Figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _timed(kernel: KernelRecord) -> list[tuple[CandidateRecord, NumberOfRecord]]:
    """Each candidate (not a measurement) with its number of record, when it has one to plot."""
    numbers = [(c, kernel.number_of(c)) for c in kernel.candidates if c.origin not in MEASUREMENTS]
    return [(c, n) for c, n in numbers if n.speedup is not None]


def kernel_chart(kernel: KernelRecord) -> str | None:
    """Each timed candidate's number of record by round (with its 95% interval: the best's re-timing in place of
    its early look), and the best accepted so far; a best withheld while re-timing is named, not plotted."""
    timed = _timed(kernel)
    withheld = [c for c in kernel.candidates if c.origin not in MEASUREMENTS and kernel.number_of(c).withheld]
    if not timed and not withheld:
        return None
    figure = Figure(figsize=(6.4, 2.8), dpi=100)
    axes = figure.add_subplot()
    for status in sorted({c.status for c, _ in timed}):
        group = [(c, n) for c, n in timed if c.status == status]
        axes.errorbar(
            [c.round for c, _ in group],
            [n.speedup for _, n in group],
            yerr=[[_below(n.speedup, n.ci) for _, n in group], [_above(n.speedup, n.ci) for _, n in group]],
            fmt="o",
            capsize=3,
            color=STATUS_COLORS.get(status, "#6e7781"),
            label=status,
        )
    for c in withheld:
        axes.text(c.round, 1.0, f" candidate {c.id}: {PENDING}", fontsize=8, rotation=90, va="bottom")
    rounds = sorted({c.round for c, _ in timed} | {c.round for c in withheld} | {0})
    best, best_so_far = 1.0, []
    for r in rounds:
        accepted = [n.speedup for c, n in timed if c.round == r and c.status == Status.FASTER and n.speedup]
        best = max([best, *accepted])
        best_so_far.append(best)
    axes.step(rounds, best_so_far, where="post", color="#1a7f37", alpha=0.6, label="best accepted")
    axes.axhline(1.0, color="#57606a", linestyle="--", linewidth=1)
    axes.set_xlabel("round")
    axes.set_ylabel("speedup vs baseline (x)")
    axes.set_xticks(rounds)
    axes.set_title(kernel.name, fontsize=10)
    axes.legend(fontsize=8, loc="best")
    axes.grid(alpha=0.3)
    return _svg(figure)


def _below(value: float | None, ci: tuple[float, float] | None) -> float:
    return max(0.0, value - ci[0]) if value is not None and ci is not None else 0.0


def _above(value: float | None, ci: tuple[float, float] | None) -> float:
    return max(0.0, ci[1] - value) if value is not None and ci is not None else 0.0


def run_chart(kernels: list[KernelRecord]) -> str:
    """Each kernel's number of record (1.0x where nothing was accepted, `re-timing` where it is withheld), with
    its 95% interval."""
    figure = Figure(figsize=(6.4, 0.6 + 0.45 * max(1, len(kernels))), dpi=100)
    axes = figure.add_subplot()
    names, values, errors, colors, labels = [], [], [[], []], [], []
    for k in kernels:
        number = k.number()
        quoted = number.quoted if number is not None else None
        names.append(k.name)
        if quoted is not None and quoted.speedup is not None:
            values.append(quoted.speedup)
            errors[0].append(_below(quoted.speedup, quoted.ci))
            errors[1].append(_above(quoted.speedup, quoted.ci))
            colors.append(STATUS_COLORS.get(quoted.status, "#6e7781"))
            labels.append(f"  {quoted.speedup:.2f}x")
        else:
            values.append(1.0)
            errors[0].append(0.0)
            errors[1].append(0.0)
            colors.append("#d0d7de")
            labels.append(f"  {PENDING if number is not None and number.withheld else k.status}")
    positions = list(range(len(names)))
    axes.barh(positions, values, xerr=errors, color=colors, capsize=3)
    ends = [value + high for value, high in zip(values, errors[1])]
    for y, (end, label) in enumerate(zip(ends, labels)):
        axes.text(end, y, label, va="center", fontsize=8)
    axes.set_yticks(positions, labels=names)
    axes.invert_yaxis()
    axes.axvline(1.0, color="#57606a", linestyle="--", linewidth=1)
    axes.set_xlabel("best speedup vs baseline (x)")
    axes.set_xlim(0, max(ends) * 1.35)
    axes.grid(axis="x", alpha=0.3)
    return _svg(figure)


REFERENCE_COLORS = {"baseline": "#1a7f37", "eager": "#8250df", "compile": "#bc4c00"}


def references_chart(rows: list[tuple[str, dict]]) -> str | None:
    """Each kernel's best (or its baseline, when nothing beat it) against the baseline, torch eager and
    torch.compile, with intervals; log scale, so 0.05x and 20x sit at the same distance from 1.0. `rows` are
    (kernel, speedup_vs); None when no kernel has a value to show."""
    if not any((entry or {}).get("value") for _, vs in rows for entry in vs.values()):
        return None
    figure = Figure(figsize=(6.4, 0.8 + 0.75 * len(rows)), dpi=100)
    axes = figure.add_subplot()
    height = 0.26
    values = []
    for y, (_, vs) in enumerate(rows):
        for offset, kind in zip((-height, 0.0, height), REFERENCE_COLORS):
            entry = vs.get(kind) or {}
            value = entry.get("value")
            if not value:
                missing = PENDING if entry.get("reason") == PENDING else f"no {kind} point"
                axes.text(1.0, y + offset, f"  {missing}", va="center", fontsize=7, color="#6e7781")
                continue
            low, high = entry.get("ci") or (value, value)
            values += [low, high]
            axes.barh(  # from 1.0 to the value: left of 1.0 is slower than that reference
                y + offset,
                value - 1.0,
                left=1.0,
                height=height,
                xerr=[[max(0.0, value - low)], [max(0.0, high - value)]],
                color=REFERENCE_COLORS[kind],
                capsize=2,
                label=kind if y == 0 else None,
            )
            axes.text(high, y + offset, f"  {value:.2f}x {kind}", va="center", fontsize=7)
    axes.set_xscale("log")
    axes.axvline(1.0, color="#57606a", linestyle="--", linewidth=1)
    names = [
        f"{name}\n(baseline: nothing beat it)" if (vs.get("baseline") or {}).get("shipped") else name
        for name, vs in rows
    ]
    axes.set_yticks(range(len(rows)), labels=names)
    axes.invert_yaxis()
    axes.set_xlim(min(values + [1.0]) / 1.6, max(values + [1.0]) * 3.0)
    axes.set_xlabel("best candidate's speedup against each (x, log scale; left of 1.0: slower)")
    axes.legend(fontsize=8, loc="lower right")
    axes.grid(axis="x", alpha=0.3)
    return _svg(figure)


@dataclass
class RooflinePoint:
    kernel: str
    shape: str
    dtype: str
    intensity: float  # FLOP per byte of minimum traffic
    baseline_gflops: float
    best_gflops: float | None  # None: nothing beat the baseline


@dataclass
class Roofline:
    """One device's ceilings and every kernel's baseline and winner on it."""

    device: str
    memory_gbps: float
    gflops: dict[str, float]  # dtype -> measured matmul GFLOP/s
    points: list[RooflinePoint]

    def roof(self, dtype: str) -> tuple[float, str]:
        """The compute roof for a dtype, by the rule the floors were computed with."""
        from kernel_agent.measure.ceilings import peak_rate

        peak, used = peak_rate(self.gflops, dtype)
        return float(peak or 0.0), str(used or dtype)


def roofline_data(kernels: list[KernelRecord]) -> list[Roofline]:
    """Per device fingerprint: ceilings from the stored verdicts, and each shape's achieved GFLOP/s.

    The winner's point and its baseline point come from the same A/B run (the verdict of the best's
    number of record: its re-timing once that superseded the early look), so the arrow between them is a
    side-by-side measurement. While the best's number is withheld (a wide early look not re-timed yet), its
    run gives the baseline point alone.
    Shapes with no FLOPs (pure data movement) have no place on a FLOP/s axis.
    """
    from kernel_agent.measure.roofline import RooflineRow

    found: dict[str, Roofline] = {}
    for kernel in kernels:
        number = kernel.number()
        timed_id = number.candidate if number is not None else None  # the best's own run while withheld
        best = next((c for c in kernel.candidates if c.id == timed_id), None)
        baseline = next((c for c in reversed(kernel.candidates) if c.origin == BASELINE), None)  # newest: --retry
        source = best if best is not None and best.verdict.get("roofline") else baseline
        winner = source is best and number is not None and not number.withheld
        record = source.verdict.get("roofline") if source is not None else None
        if not isinstance(record, dict) or not record.get("gflops"):
            continue
        line = found.setdefault(
            record.get("fingerprint", record["device"]),
            Roofline(record["device"], record["memory_gbps"], dict(record["gflops"]), []),
        )
        for row in map(RooflineRow.from_json, record.get("shapes", [])):
            flops, intensity = row.counts.flops or 0, row.counts.arithmetic_intensity
            if flops <= 0 or row.baseline is None or not intensity:
                continue
            best = row.candidate if winner else None
            line.points.append(
                RooflinePoint(
                    kernel.name,
                    "x".join(str(d) for d in row.shape),
                    row.dtype,
                    intensity,
                    flops / row.baseline.median_ms / 1e6,
                    flops / best.median_ms / 1e6 if best is not None else None,
                )
            )
    return [line for line in found.values() if line.points]


def roofline_chart(line: Roofline) -> str:
    """Log-log roofline: the bandwidth slope and the matmul roof, baselines hollow, winners filled."""
    figure = Figure(figsize=(6.4, 4.0), dpi=100)
    axes = figure.add_subplot()
    xs = [p.intensity for p in line.points]
    roofs = sorted({line.roof(p.dtype) for p in line.points}, reverse=True)
    ridges = [peak / line.memory_gbps for peak, _ in roofs]
    lo, hi = min(xs + ridges) / 4, max(xs + ridges) * 4
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    for (peak, dtype), style in zip(roofs, ("-", "--", ":", "-.")):
        axes.plot(
            grid,
            [min(peak, line.memory_gbps * x) for x in grid],
            color="#24292f",
            linewidth=1.5,
            linestyle=style,
            label=f"roof: {line.memory_gbps:.3g} GB/s, {peak:.4g} GFLOP/s ({dtype} matmul)",
        )
    kernels = list(dict.fromkeys(p.kernel for p in line.points))  # one color per kernel, first-seen order
    palette = matplotlib.colormaps["tab10"]
    color_of = {name: palette(i % 10) for i, name in enumerate(kernels)}
    for point in line.points:
        color = color_of[point.kernel]
        axes.scatter([point.intensity], [point.baseline_gflops], facecolors="none", edgecolors=[color], s=40)
        if point.best_gflops is not None:
            axes.scatter([point.intensity], [point.best_gflops], color=[color], s=40, marker="D")
            axes.annotate(
                "",
                xy=(point.intensity, point.best_gflops),
                xytext=(point.intensity, point.baseline_gflops),
                arrowprops={"arrowstyle": "->", "color": color, "alpha": 0.7},
            )
    for name in kernels:
        shapes = ", ".join(p.shape for p in line.points if p.kernel == name)
        axes.scatter([], [], color=[color_of[name]], marker="D", s=40, label=f"{name} ({shapes})")
    axes.scatter([], [], facecolors="none", edgecolors=["#57606a"], s=40, label="hollow: baseline")
    axes.scatter([], [], color=["#57606a"], marker="D", s=40, label="filled: best candidate")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlim(lo, hi)
    axes.set_xlabel("arithmetic intensity (FLOP per byte of minimum traffic)")
    axes.set_ylabel("achieved GFLOP/s")
    axes.set_title(f"roofline on {line.device} (ceilings measured by kernel-agent)", fontsize=10)
    axes.grid(alpha=0.3, which="both")
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    return _svg(figure)


MICRO_COLORS = {"micro vs baseline": "#1a7f37", "micro vs eager": "#8250df", "model": "#0969da"}


def e2e_chart(run: dict) -> str | None:
    """One stored `e2e` run: each swapped op's certified micro speedups (over its baseline, over torch eager, which
    the unswapped model runs) above the model's measured forward-pass speedup per shape, each with its interval,
    and the Amdahl bound the ops' shares allow marked on the model's bars. Log scale. None with nothing to plot."""
    rows: list[tuple[str, str, float, list[float] | None]] = []
    for op in run.get("ops") or []:
        for label, key in (("micro vs baseline", "micro"), ("micro vs eager", "vs_eager")):
            if op.get(key):
                rows.append((f"{op['kernel']} ({label})", label, op[key], op.get(f"{key}_ci")))
    bounds = run.get("amdahl") or {}
    for shape in run.get("per_shape") or []:
        rows.append((f"model forward {shape['shape']}", "model", shape["speedup"], shape.get("ci")))
    if not rows:
        return None
    figure = Figure(figsize=(6.4, 0.9 + 0.4 * len(rows)), dpi=100)
    axes = figure.add_subplot()
    values = []
    for y, (_, kind, value, ci) in enumerate(rows):
        low, high = ci or (value, value)
        values += [low, high]
        axes.barh(
            y,
            value - 1.0,
            left=1.0,
            height=0.6,
            xerr=[[max(0.0, value - low)], [max(0.0, high - value)]],
            color=MICRO_COLORS[kind],
            capsize=2,
        )
        axes.text(max(high, value), y, f"  {value:.2f}x", va="center", fontsize=7)
    for y, (name, kind, _, _) in enumerate(rows):
        bound = bounds.get(name.removeprefix("model forward ")) if kind == "model" else None
        if bound:
            values.append(bound)
            axes.plot([bound], [y], marker="|", markersize=14, color="#cf222e")
            axes.text(bound, y - 0.35, "Amdahl bound", fontsize=6, color="#cf222e", ha="center")
    axes.set_xscale("log")
    axes.axvline(1.0, color="#57606a", linestyle="--", linewidth=1)
    axes.set_yticks(range(len(rows)), labels=[name for name, *_ in rows])
    axes.invert_yaxis()
    axes.set_xlim(min(values + [1.0]) / 1.4, max(values + [1.0]) * 2.0)
    axes.set_xlabel("speedup (x, log scale; left of 1.0: slower)")
    axes.grid(axis="x", alpha=0.3)
    return _svg(figure)
