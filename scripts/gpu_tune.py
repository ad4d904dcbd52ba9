"""`tune` and `select report` without a database (the GPU machine has no sqlalchemy): a tuning family's configs
timed per shape through the real evaluation (`tune.ground_truth.tune`), the rows kept in a JSON-lines file, and
every selector scored on them (`select.score`). Used by `scripts/gpu-check` on a lent GPU (issue 35, DESIGN.md
section 14); a grid and shape subset keep it inside the check's few minutes.

    python scripts/gpu_tune.py examples/tuning/triton_tiled_matmul --device cuda --rows OUT.jsonl \
        [--grid '{"BLOCK_M": [64, 128]}'] [--train 3] [--heldout 3] [--quick-rounds 2] [--full-rounds 4]

The rows carry what `kernel-agent tune` would store (shape, dtype, config, stage, status, times); loading them
into a database for `export` is not built yet.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernel_agent.core.config import GpuData  # noqa: E402
from kernel_agent.core.tuning import ConfigTime, Stage  # noqa: E402
from kernel_agent.evaluate.pipeline import EvalOptions  # noqa: E402
from kernel_agent.problem.load import load_problem  # noqa: E402
from kernel_agent.tune.ground_truth import TunePlan, default_config, tune  # noqa: E402
from kernel_agent.tune.space import shape_sets  # noqa: E402


class JsonRows:
    """The `tune.ground_truth.Store` of a machine without a database: rows appended to a JSON-lines file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[ConfigTime] = []
        self.path.write_text("")

    def stored(self) -> list[ConfigTime]:
        return list(self.rows)

    def put(self, rows: list[ConfigTime]) -> None:
        self.rows += rows
        with self.path.open("a") as out:
            for row in rows:
                out.write(json.dumps({**dataclasses.asdict(row), "stage": int(row.stage)}) + "\n")


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problem", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpu-data", choices=("host", "device"), default="host")
    parser.add_argument("--rows", type=Path, required=True, help="the JSON-lines file the rows go to")
    parser.add_argument("--grid", default="", help="a JSON object of tunables to keep (a subset of TUNABLES)")
    parser.add_argument("--train", type=int, default=3, help="training shapes used (the first N)")
    parser.add_argument("--heldout", type=int, default=3, help="held-out shapes used (the first N)")
    parser.add_argument("--quick-rounds", type=int, default=2)
    parser.add_argument("--full-rounds", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--threads", type=int, default=None)
    return parser.parse_args()


def main() -> int:
    args = arguments()
    problem = load_problem(args.problem)
    if args.grid:
        problem = dataclasses.replace(problem, tunables={**problem.tunables, **json.loads(args.grid)})
    sets = shape_sets(problem)
    train, heldout = sets.train[: args.train], sets.heldout[: args.heldout]
    variant = problem.baseline_source
    plan = TunePlan(train + heldout, problem.dtypes[0], args.quick_rounds, args.full_rounds, top=1)
    store = JsonRows(args.rows)
    with tempfile.TemporaryDirectory() as sandbox:
        options = EvalOptions(
            device=args.device,
            sandbox_root=Path(sandbox),
            timeout=args.timeout,
            threads=args.threads,
            gpu_data=GpuData(args.gpu_data),
        )
        rows = tune(problem, variant, plan, options, store, lambda line: print(line, file=sys.stderr, flush=True))
    print(f"{problem.name}: {len(rows)} rows, {sum(r.timed for r in rows)} timed")
    print(best_table(rows, default_config(problem, variant)))
    print(report(problem, variant, rows, train, heldout, args.threads))
    return 0


def best_table(rows: list[ConfigTime], default: dict) -> str:
    from kernel_agent.select.table import GroundTruth

    table = GroundTruth.from_rows(rows, default)
    lines = ["| shape | best config | ms | default ms |", "|---|---|---|---|"]
    for shape in table.shapes:
        best = table.best(shape)
        mine = table.times[shape].get(table.default) if table.default else None
        ms = "-" if best is None else f"{table.times[shape][best]:.4g}"
        lines.append(f"| {list(shape)} | {best or '(none timed)'} | {ms} | {'-' if mine is None else f'{mine:.4g}'} |")
    return "\n".join(lines)


def report(problem, variant: str, rows: list[ConfigTime], train: list, heldout: list, threads: int | None) -> str:  # noqa: ANN001
    """`select report`'s table on these rows (the device facts are rough defaults: no stored ceilings here)."""
    import torch

    from kernel_agent.select import report as render
    from kernel_agent.select.base import Context
    from kernel_agent.select.device import device_facts
    from kernel_agent.select.registry import selectors
    from kernel_agent.select.score import score
    from kernel_agent.select.table import GroundTruth

    timed = [r for r in rows if r.timed and r.stage in (Stage.SCREEN, Stage.CONFIRM)]
    if not any(r.shape in heldout for r in timed) or not any(r.shape in train for r in timed):
        return "selector report: no timed rows on both training and held-out shapes (nothing to score)"
    table = GroundTruth.from_rows(rows, default_config(problem, variant))
    size = torch.empty((), dtype=getattr(torch, problem.dtypes[0])).element_size()
    cost_model = dict(getattr(problem.module, "COST_MODEL", None) or {})
    context = Context(problem.tunables, device_facts(None, threads, problem.dtypes[0]), cost_model, size)
    scores = [score(s, table, train, heldout, context) for s in selectors(analytical=bool(cost_model))]
    return render.markdown(scores)


if __name__ == "__main__":
    sys.exit(main())
