"""`kernel-agent select report PROBLEM`: how well each selector picks a variant's config on held-out shapes,
scored from the rows `tune` stored (nothing is timed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from kernel_agent.cli.common import EXIT_OK, fail, stderr, stdout
from kernel_agent.cli.options import DB, json_option, open_db
from kernel_agent.select import abstain

app = typer.Typer(help="Per-shape config selectors, scored on stored ground truth.", rich_markup_mode=None)


@app.command("report")
def report_command(
    problem: Path = typer.Argument(..., help="A problem folder tuned with kernel-agent tune (train and held-out)."),
    candidate: str | None = typer.Option(
        None, "--candidate", help="The tuned variant (a file or a candidate id), if it was not kernel.py."
    ),
    threads: int | None = typer.Option(
        None, "--threads", min=1, help="The thread count it was tuned with (default: all cores)."
    ),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda: the device it was tuned on."),
    dtype: str | None = typer.Option(None, "--dtype", help="The tuned dtype (default: the problem's first)."),
    abstain_k: int = typer.Option(abstain.K, "--abstain-k", min=1, help="Configs timed when a selector abstains."),
    abstain_below: float = typer.Option(
        abstain.BELOW, "--abstain-below", help="Confidence under which a selector abstains."
    ),
    db: str = DB,
    json_output: bool = json_option("one JSON object: every selector's score and its per-shape picks"),
) -> None:
    """Score every selector on the held-out shapes: efficiency, P10, worst, top-1/top-5, tau, W/T/L, timed, abstain."""
    import os

    from kernel_agent.cli.profile_cmd import candidate_source
    from kernel_agent.db.tuning import VariantKey
    from kernel_agent.db.writes import problem_hash, sha256
    from kernel_agent.evaluate.pipeline import run_device
    from kernel_agent.measure.ceilings import fingerprint_key
    from kernel_agent.problem.load import ProblemError, load_problem
    from kernel_agent.select import report, stored
    from kernel_agent.select.registry import selectors, skipped
    from kernel_agent.select.score import LeakError, score
    from kernel_agent.tune.space import SpaceError

    if device not in ("auto", "cpu", "cuda"):
        fail(f"--device {device}: use auto, cpu or cuda")
    try:
        loaded = load_problem(problem)
    except ProblemError as exc:
        fail(str(exc))
    variant = loaded.baseline_source if candidate is None else candidate_source(candidate, loaded.name, db)
    threads = threads or os.cpu_count() or 1
    where = run_device(loaded, device)
    key = VariantKey(
        loaded.name, problem_hash(loaded), sha256(variant), fingerprint_key(where, threads), dtype or loaded.dtypes[0]
    )
    try:
        found = stored.load(open_db(db), loaded, variant, key, threads)
        analytical = bool(found.context.cost_model)
        scores = [
            score(s, found.table, found.sets.train, found.sets.heldout, found.context)
            for s in selectors(abstain_k, abstain_below, analytical)
        ]
    except (ValueError, SpaceError, LeakError) as exc:
        fail(str(exc))
    if json_output:
        sys.stdout.write(json.dumps({"problem": loaded.name, "scores": [report.to_json(s) for s in scores]}) + "\n")
        raise typer.Exit(EXIT_OK)
    pool, shapes = len(found.table.pool), scores[0].shapes
    stdout.print(
        f"{loaded.name}: pool {pool} configs, {shapes} held-out shapes, {found.ceilings_note}", highlight=False
    )
    stdout.print(report.markdown(scores), highlight=False, soft_wrap=True)
    stdout.print(report.definitions(), highlight=False, soft_wrap=True)
    for line in skipped():
        stderr.print(f"skipped: {line}", highlight=False)
    raise typer.Exit(EXIT_OK)
