"""`kernel-agent e2e PACKAGE --model RECIPE`: a package's kernels swapped into a model, checked and A/B-timed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import EXIT_OK, EXIT_VERDICT, fail, stderr, stdout, warn
from kernel_agent.core.text import clean
from kernel_agent.prove.dispatch import NO_KERNEL_RAN


def e2e_command(
    package: Path = typer.Argument(..., help="The folder `kernel-agent export --out` wrote (pip or hf-kernels)."),
    model: str = typer.Option(
        ..., "--model", help="The recipe: FILE.py:FACTORY or MODULE:FACTORY returning a kernel_agent ModelCase."
    ),
    size: str = typer.Option("small", "--size", help="Passed to the recipe's factory (the bundled one: small, base)."),
    rounds: int = typer.Option(10, "--rounds", min=2, help="A/B rounds of the forward pass (each shape, both sides)."),
    threads: int | None = typer.Option(
        None, "--threads", min=1, help="torch threads for both models (default: the certificates' thread count)."
    ),
    store: bool = typer.Option(True, "--store/--no-store", help="Keep the result in the database for the report."),
    json_output: bool = opt.json_option("one JSON object"),
    db: str = opt.DB,
) -> None:
    """Build the recipe's model, swap the package's kernels into a copy (kernels.kernelize for hf-kernels, the
    package's functions for pip), compare the outputs within the recipe's tolerance, and A/B-time the forward pass
    with the statistics of a verdict; print micro and model speedups side by side with each op's share of the
    model's time and the Amdahl bound. Exit 1 when the outputs differ, 2 when the package or recipe is refused."""
    import torch

    from kernel_agent.prove.e2e import run_e2e
    from kernel_agent.prove.recipe import RecipeError
    from kernel_agent.prove.shipped import PackageError, open_package

    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        shipped = open_package(package)
        certified = {c.device.threads for v in shipped.variants for c in v.bundle.certificates if c.device.threads}
        count = threads or (min(certified) if certified else torch.get_num_threads())
        result = run_e2e(shipped, model, size, device, rounds, count)
    except (PackageError, RecipeError) as exc:
        fail(f"refused: {exc}" if isinstance(exc, PackageError) else str(exc))
    except ImportError as exc:
        fail(f"{exc.name or exc} is not installed: the hf-kernels format is swapped in with `pip install kernels`")
    data = result.to_json()
    if store:
        try:
            from kernel_agent.db.e2e import store_e2e

            data["id"] = store_e2e(opt.open_db(db), data)
        except ImportError as exc:
            warn(f"not stored: {exc.name} is not installed")
    if json_output:
        sys.stdout.write(json.dumps(data, default=str) + "\n")
    else:
        show(data)
    no_kernel = result.reason.startswith(NO_KERNEL_RAN)
    raise typer.Exit(EXIT_VERDICT if result.status == "mismatch" or no_kernel else EXIT_OK)


def _x(value: float | None, ci: list[float] | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def _realized(fraction: float | None, ci: list[float]) -> str:
    if fraction is None:
        return ""
    if ci[1] < 1.0:
        return "; the swapped model is slower: none of it realized"
    return f", {max(fraction, 0.0):.0%} of it realized"


def show(data: dict) -> None:
    labels = list((data["ops"][0]["share"] if data["ops"] else {}) or [])
    stdout.print(
        f"{clean(data['package_name'], 80)} ({data['format']}) in {clean(data['recipe'], 120)} on {data['device']}, "
        f"{data['threads']} thread(s); swapped by {data['swapped_by']}",
        highlight=False,
    )
    head = f"{'op':<22} {'layers':>6}  {'micro vs baseline':<22} {'micro vs eager':<22} "
    stdout.print(head + " ".join(f"share {label:<14}" for label in labels), highlight=False)
    for op in data["ops"]:
        shares = " ".join(f"{op['share'][label]:>20.1%}" for label in labels)
        stdout.print(
            f"{clean(op['kernel'], 22):<22} {op['layers']:>6}  {_x(op['micro'], op['micro_ci']):<22} "
            f"{_x(op['vs_eager'], op['vs_eager_ci']):<22} {shares}",
            highlight=False,
        )
    for kernel, why in data["unused"].items():
        stdout.print(f"{clean(kernel, 22):<22} not in the model: {clean(why, 200)}", highlight=False)
    for line in data.get("dispatch", []):
        stdout.print(f"dispatch: {clean(line, 300)}", highlight=False)
    error = data["max_abs_error"]
    rtol, atol = data["tolerance"]
    stdout.print(
        f"outputs: swapped vs unswapped, largest |difference| {error:.3g} (rtol {rtol:g}, atol {atol:g})"
        if error is not None
        else "outputs: not comparable",
        highlight=False,
    )
    if data.get("precision"):
        plain, swapped = data["precision"]
        stdout.print(
            f"precision: against the model in float64, unswapped {plain:.3g}, swapped {swapped:.3g} (relative norm; "
            "at most twice the unswapped)",
            highlight=False,
        )
    for kernel, refused in data.get("unswapped", {}).items():
        for path, why in refused.items():
            stdout.print(
                f"{clean(kernel, 22):<22} not swapped at {clean(path, 80)}: {clean(why, 200)}", highlight=False
            )
    for row in data["per_shape"]:
        bound = data["amdahl"].get(row["shape"])
        realized = data.get("realized", {}).get(row["shape"])
        stdout.print(
            f"model forward {row['shape']}: {_x(row['speedup'], row['ci'])} (unswapped {row['plain_ms']:.3f} ms, "
            f"swapped {row['swapped_ms']:.3f} ms, medians); Amdahl bound from the micro speedups (vs what it ran): "
            f"{_x(bound)}" + _realized(realized, row["ci"]),
            highlight=False,
        )
    for line in data.get("shares_against_regions", []):
        stdout.print(f"share: {clean(line, 300)}", highlight=False)
    for flag in data.get("flags", []):
        stderr.print(f"flagged: {clean(flag, 400)}", highlight=False)
    if data["speedup"] is not None:
        stdout.print(
            f"model (geometric mean over shapes, {data['rounds']} rounds): {_x(data['speedup'], data['ci'])}",
            highlight=False,
        )
    if data["status"] != "timed":
        stderr.print(f"{data['status']}: {data['reason']}", highlight=False)
    if data.get("note"):
        stdout.print(f"note: {clean(data['note'], 400)}", highlight=False)
