"""`kernel-agent verify-package DIR`: an exported package's certificates checked and measured again here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import EXIT_OK, EXIT_VERDICT, fail, stderr, stdout
from kernel_agent.cli.options import fields_of, from_config
from kernel_agent.core.config import EvalConfig
from kernel_agent.core.text import clean


@from_config
def verify_package_command(
    package: Path = typer.Argument(..., help="The folder `kernel-agent export --out` wrote (pip or hf-kernels)."),
    json_output: bool = opt.json_option("one JSON object"),
    evaluation: EvalConfig = fields_of(
        only=("sandbox_root", "threads", "timeout", "isolation", "timing_rounds", "sequential", "min_gain")
    ),
) -> None:
    """Refuse a package whose files differ from their certificates; evaluate each certified kernel again here (the
    same checks and A/B statistics, against the package's own reference and baseline); call it through the
    package's own loader; print the re-measured numbers beside the certified ones. Exit 1 when a kernel is wrong
    here, 2 when the package is refused."""
    import torch

    from kernel_agent.evaluate.context import EvalOptions
    from kernel_agent.prove.shipped import PackageError, open_package, tampered
    from kernel_agent.prove.verify import variants_here, verify_variant

    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        shipped = open_package(package)
        variants = variants_here(shipped, device)
        if not variants:
            fail(f"{package}: no variant of this package was built for {device}")
        for variant in variants:
            changed = tampered(variant)
            if changed:
                fail(
                    f"refused: {variant.folder}: {changed[0]}"
                    + (f" (and {len(changed) - 1} more)" * (len(changed) > 1))
                )
        certified_threads = {c.device.threads for v in variants for c in v.bundle.certificates if c.device.threads}
        threads = evaluation.threads or (min(certified_threads) if certified_threads else None)
        options = EvalOptions.from_config(evaluation, threads=threads)
        results = []
        for variant in variants:
            stderr.print(f"verifying {variant.folder} ({len(variant.bundle.certificates)} certificate(s)) ...")
            results.append(verify_variant(shipped, variant, options, evaluation.timeout))
    except PackageError as exc:
        fail(f"refused: {exc}")
    except RuntimeError as exc:  # e.g. the requested isolation level is unavailable
        fail(str(exc))
    if json_output:
        out = {
            "package": str(package),
            "format": shipped.format,
            "correct": all(r.correct for r in results),
            "kernels": [m.to_json() for r in results for m in r.remeasured],
            "loaded": [vars(x) for r in results for x in r.loaded],
        }
        sys.stdout.write(json.dumps(out, default=str) + "\n")
    else:
        for r in results:
            show(r)
    raise typer.Exit(EXIT_OK if all(r.correct for r in results) else EXIT_VERDICT)


def _number(speedup: float | None, ci: list[float] | None) -> str:
    if speedup is None:
        return "-"
    return f"{speedup:.3f}x" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")


def show(result) -> None:
    """Certified and re-measured side by side, per kernel and per shape; then the loaded package's calls."""
    for m in result.remeasured:
        c, v = m.certificate, m.verdict
        kernel = clean(c.kernel, 80)
        checks = f"{sum(1 for x in v.checks if x.get('passed'))}/{len(v.checks)} checks"
        stdout.print(f"{kernel} ({result.variant}): run {c.run_id}, candidate {c.candidate_id}", highlight=False)
        stdout.print(
            f"  certified    {_number(c.verdict.speedup, c.verdict.ci)} {clean(c.verdict.status, 20)} "
            f"({clean(c.verdict.ci_level, 30)}; {clean(c.device.name, 80)}, {c.device.threads} thread(s))",
            highlight=False,
        )
        timing = v.timing
        stdout.print(
            f"  re-measured  {_number(v.speedup, v.speedup_ci)} {v.status} ({timing.ci_level if timing else '-'}; "
            f"{m.here.get('device_name')}, {m.here.get('threads')} thread(s)); {checks}",
            highlight=False,
        )
        mine = {str(list(e.shape)): e for e in (timing.per_shape if timing else [])}
        for s in c.verdict.per_shape:
            here = mine.get(str(s.shape))
            stdout.print(
                f"    shape {s.shape} {clean(s.dtype, 20)}: certified {_number(s.speedup, s.ci)}, "
                f"here {_number(here.speedup, here.speedup_ci) if here else '-'}",
                highlight=False,
            )
        stdout.print(f"  {m.speed_line()}", highlight=False)
        if not m.correct:
            stdout.print(f"  error: wrong here: {v.status}: {v.reason}", highlight=False)
    for x in result.loaded:
        where = f"through {x.loader}" if x.loader else "through the package's loader"
        what = f"wrong: {x.wrong}" if x.wrong else f"correct on every check shape ({x.path} path)"
        stdout.print(f"{x.kernel} ({result.variant}) {where}: {what}", highlight=False)
