"""`kernel-agent tune PROBLEM [--candidate ID|FILE] [--shapes ...]`: time every config of a variant per shape.

The rows (one per shape and config, failures included) go into the database as each config finishes, so
running the same command again resumes where it stopped; `kernel-agent select report` scores selectors
from them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from kernel_agent.cli.common import EXIT_OK, fail, stderr, stdout
from kernel_agent.cli.options import DB, fields_of, from_config, json_option, open_db
from kernel_agent.core.config import EvalConfig


@from_config
def tune_command(
    problem: Path = typer.Argument(..., help="A problem folder with TUNABLES (and TUNE_SHAPES / HELDOUT_SHAPES)."),
    candidate: str | None = typer.Option(
        None, "--candidate", help="Tune this variant (a file, or a candidate id in the database) instead of kernel.py."
    ),
    shapes: str = typer.Option(
        "all", "--shapes", help="train, heldout, all, or a list such as '[(64, 64, 64), (8, 512, 512)]'."
    ),
    dtype: str | None = typer.Option(None, "--dtype", help="The dtype to tune (default: the problem's first)."),
    quick_rounds: int = typer.Option(2, "--quick-rounds", min=1, help="Timing rounds of stage 1 (every config)."),
    full_rounds: int = typer.Option(10, "--full-rounds", min=1, help="Timing rounds of stage 2 (top configs)."),
    top: int = typer.Option(3, "--top", min=1, help="Configs per shape re-timed in stage 2, besides the default."),
    group: int = typer.Option(
        0,
        "--shapes-per-evaluation",
        min=0,
        help="Shapes per sandboxed evaluation (0: all): a rejected evaluation fails its shapes only, "
        "at the cost of a sandbox start and the check cases per group.",
    ),
    evaluation: EvalConfig = fields_of(only=("device", "threads", "timeout", "isolation", "sandbox_root", "gpu_data")),
    db: str = DB,
    json_output: bool = json_option("one JSON object per stored row, one per line"),
) -> None:
    """Time every config of a variant's tunable space on a shape set, two-stage, in the sandbox, and store it."""
    from kernel_agent.cli.profile_cmd import candidate_source
    from kernel_agent.db.tuning import TuningStore, VariantKey
    from kernel_agent.db.writes import problem_hash, put_source
    from kernel_agent.evaluate.pipeline import EvalOptions, run_device
    from kernel_agent.measure.ceilings import fingerprint_key
    from kernel_agent.problem.load import ProblemError, load_problem
    from kernel_agent.tune.ground_truth import TunePlan, default_config, tune
    from kernel_agent.tune.space import SpaceError, chosen_shapes, configs

    try:
        loaded = load_problem(problem)
        plan = TunePlan(chosen_shapes(loaded, shapes), dtype or loaded.dtypes[0], quick_rounds, full_rounds, top, group)
    except (ProblemError, SpaceError) as exc:
        fail(str(exc))
    if plan.dtype not in loaded.dtypes:
        fail(f"--dtype {plan.dtype}: {loaded.name} declares {', '.join(loaded.dtypes)}")
    options = EvalOptions.from_config(evaluation)
    where = run_device(loaded, options.device)
    if loaded.device == "cuda" and where != "cuda":
        fail(f"{loaded.name} runs on a GPU and none is visible: tune times configs (kernel-agent eval verifies one)")
    variant = loaded.baseline_source if candidate is None else candidate_source(candidate, loaded.name, db)
    try:
        configs(loaded)
        default = default_config(loaded, variant)
    except (SpaceError, ValueError) as exc:  # no TUNABLES, or a variant that does not carry them
        fail(str(exc))
    database = open_db(db)
    with database.write() as session:
        variant_hash = put_source(session, variant)  # the tuned source is kept: rows name it by its hash
    key = VariantKey(
        loaded.name, problem_hash(loaded), variant_hash, fingerprint_key(where, options.threads), plan.dtype
    )
    rows = tune(loaded, variant, plan, options, TuningStore(database, key), _say)
    if json_output:
        for row in rows:
            sys.stdout.write(json.dumps(_json(row)) + "\n")
    else:
        _summary(rows, variant_hash, default)
    raise typer.Exit(EXIT_OK)


def _say(line: str) -> None:
    stderr.print(line, highlight=False)


def _json(row) -> dict:  # noqa: ANN001 - core.tuning.ConfigTime
    from dataclasses import asdict

    data = asdict(row)
    data["stage"] = int(row.stage)
    return data


def _summary(rows: list, variant_hash: str, default: dict) -> None:
    from rich.table import Table

    from kernel_agent.select.table import GroundTruth

    table = GroundTruth.from_rows(rows, default)
    failed = sum(1 for r in rows if not r.timed)
    view = Table(title=f"variant {variant_hash[:12]}: fastest config per shape ({len(rows)} rows, {failed} failed)")
    for column in ("shape", "best config", "ms", "default ms"):
        view.add_column(column)
    for shape in table.shapes:
        best = table.best(shape)
        if best is None:
            view.add_row(str(list(shape)), "(none timed)", "-", "-")
            continue
        default = table.times[shape].get(table.default) if table.default else None
        view.add_row(
            str(list(shape)), best, f"{table.times[shape][best]:.4g}", "-" if default is None else f"{default:.4g}"
        )
    stdout.print(view)
