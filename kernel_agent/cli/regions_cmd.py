"""`kernel-agent regions RECIPE`: from a model to its ranked, verified kernel list; `--check DIR` re-checks it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import EXIT_OK, EXIT_VERDICT, fail, stderr, stdout, warn

GRANULARITIES = ("auto", "module", "chain", "op")


def regions_command(
    recipe: str = typer.Argument(
        None, help="FILE.py:FACTORY or MODULE:FACTORY returning a kernel_agent ModelCase (the one e2e takes)."
    ),
    size: str = typer.Option("small", "--size", help="Passed to the recipe's factory (bundled: tiny, small, base)."),
    device: str = typer.Option(
        "cpu",
        "--device",
        help="Where the shares are timed: cpu (host clock per op) or cuda (kernel device time from the profiler).",
    ),
    out: Path = typer.Option(Path("regions-out"), "--out", help="Folder for problems/, kernels.toml, regions.json/md."),
    granularity: str = typer.Option(
        "auto", "--granularity", help="auto (chains, layers, leaves), module, chain (chains and groups), or op."
    ),
    top: int | None = typer.Option(None, "--top", min=1, help="Emit only the K best-ranked selected regions."),
    min_share: float = typer.Option(
        0.0, "--min-share", min=0.0, max=1.0, help="Do not emit a region under this share of the forward pass."
    ),
    capture: str = typer.Option("auto", "--capture", help="auto (export, else a dispatch trace), export or trace."),
    rounds: int = typer.Option(20, "--rounds", min=3, help="Timed rounds of the replayed forward per shape label."),
    weights: bool = typer.Option(
        False, "--weights/--no-weights", help="Also write each problem's parameters as weights.safetensors."
    ),
    index_dist: str = typer.Option(
        "uniform", "--index-dist", help="How problems draw embedding indices: uniform, or zipf:A (power A, e.g. 1.05)."
    ),
    no_timing: bool = typer.Option(False, "--no-timing", help="Skip the shares (find, write and check only)."),
    compile_column: bool = typer.Option(
        False,
        "--compile",
        help="Also time each emitted region's reference under torch.compile against eager (whether compile "
        "already fixes it); about 10 s of compiling per region.",
    ),
    check: Path | None = typer.Option(
        None, "--check", help="Re-run the checks on the problems a previous run wrote to DIR (no timing)."
    ),
    json_output: bool = opt.json_option("regions.json's content"),
    db: str = opt.DB,
) -> None:
    """Capture the model per shape label, find its regions (modules, fusable chains, anchor+epilogue, horizontal
    groups), select a disjoint cut, write each selected region as a checked native problem, time each region's
    share of the forward pass, and rank by the model's Amdahl bound. Exit 1 when a selected region could not be
    emitted, 2 when the recipe or the model cannot be captured at all."""
    if check is not None:
        _check(check, json_output)
        return
    if not recipe:
        fail("give a RECIPE (FILE.py:FACTORY or MODULE:FACTORY), or --check DIR")
    if granularity not in GRANULARITIES:
        fail(f"--granularity {granularity!r}: use one of {', '.join(GRANULARITIES)}")
    if capture not in ("auto", "export", "trace"):
        fail(f"--capture {capture!r}: use auto, export or trace")
    if weights:
        try:
            import safetensors  # noqa: F401
        except ImportError:
            fail("--weights writes safetensors files: pip install safetensors (or 'kernel-agent[models]')")
    if not _index_dist_ok(index_dist):
        fail(f"--index-dist {index_dist!r}: use uniform or zipf:A with A > 0 (e.g. zipf:1.05)")
    if device not in ("cpu", "cuda"):
        fail(f"--device {device!r}: use cpu or cuda")
    if device == "cuda" and not _cuda_here():
        fail("--device cuda: no CUDA device here (torch.cuda.is_available() is False); use --device cpu")
    from kernel_agent.regions.outcome import RegionsPlan
    from kernel_agent.regions.run import run_regions
    from kernel_agent.regions.tables import outcome_json

    ceilings = None
    if not no_timing:
        from kernel_agent.cli.ceilings import profile_ceilings

        ceilings, _ = profile_ceilings(db, device, None, False)  # the ones eval and optimize use, stored once
    plan = RegionsPlan(
        recipe,
        size,
        out,
        granularity,
        top,
        min_share,
        capture,
        rounds,
        weights,
        not no_timing,
        index_dist,
        ceilings,
        device,
        compile_column,
    )
    with stderr.status("regions: starting") as status:
        outcome = run_regions(plan, lambda step: status.update(f"regions: {step}"))
    data = outcome_json(outcome)
    if json_output:
        sys.stdout.write(json.dumps(data) + "\n")
    else:
        show(data, out)
    for error in outcome.errors:
        warn(error)
    if not outcome.captures:
        raise typer.Exit(2)
    lost = [
        r
        for r in data["regions"]
        if r["selected"]
        and not r["emitted"]
        and "not emitted:" in r["status"]
        and "--min-share" not in r["status"]
        and "--top" not in r["status"]
    ]
    raise typer.Exit(EXIT_VERDICT if lost else EXIT_OK)


def _cuda_here() -> bool:
    import torch

    return torch.cuda.is_available()


def _index_dist_ok(text: str) -> bool:
    if text == "uniform":
        return True
    head, _, power = text.partition(":")
    try:
        return head == "zipf" and float(power) > 0
    except ValueError:
        return False


def show(data: dict, out: Path) -> None:
    from kernel_agent.regions.tables import markdown

    for line in markdown(data).splitlines():
        stdout.print(line, highlight=False, markup=False, soft_wrap=True)
    emitted = sum(r["emitted"] for r in data["regions"])
    stdout.print(
        f"{emitted} problem(s) in {out / 'problems'}; manifest {out / 'kernels.toml'}", highlight=False, markup=False
    )


def _check(folder: Path, json_output: bool) -> None:
    from kernel_agent.regions.checks import CheckFailed, check_folder
    from kernel_agent.regions.run import captured_values

    index = folder / "regions.json"
    if not index.is_file():
        fail(f"--check {folder}: no regions.json there; pass the --out folder of a regions run")
    data = json.loads(index.read_text())
    with stderr.status("regions --check: capturing the recipe again"):
        captured, why = captured_values(data)
    if why:
        warn(f"the captured-values check is skipped (it needs the model): {why}")
    results = []
    for r in data["regions"]:
        if not r["emitted"]:
            continue
        try:
            if not why and r["id"] not in captured:
                raise CheckFailed("the recipe no longer has this region (its model or inputs changed)")
            check_folder(folder / r["folder"], captured.get(r["id"]) if not why else None)
            results.append({"folder": r["folder"], "passed": True, "reason": ""})
        except CheckFailed as exc:
            results.append({"folder": r["folder"], "passed": False, "reason": str(exc)})
    if json_output:
        sys.stdout.write(json.dumps({"checked": results}) + "\n")
    else:
        for item in results:
            mark = "passed" if item["passed"] else f"FAILED: {item['reason']}"
            stdout.print(f"{item['folder']}: {mark}", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(EXIT_OK if all(i["passed"] for i in results) else EXIT_VERDICT)
