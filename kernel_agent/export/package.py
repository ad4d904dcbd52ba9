"""Export a run's winners as an installable package (DESIGN.md section 10).

Why re-verify before writing: the database records what was true when the run
measured it; the problem (its reference, its shapes) may have changed since,
and a package must not ship a kernel that no longer matches its reference.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernel_agent.db import review_reads as rq
from kernel_agent.db.session import Database
from kernel_agent.evaluate.pipeline import EvalOptions
from kernel_agent.export import files as files
from kernel_agent.review.decisions import may_ship

MARKER = ".kernel-agent-export"


class ExportError(ValueError):
    """The export cannot start (bad name, occupied folder, unknown kernel): one line."""


@dataclass
class ExportResult:
    out: Path
    package: str
    exported: list[files.ExportedKernel] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (kernel, reason)


Notify = Callable[[str], None]


def _awaiting(c: rq.CandidateRecord, db: Database | None) -> str:
    """One sentence about a candidate that ships only after an approve: its speedup, interval,
    reason and the command."""
    return rq.review_summary(c.id, c.speedup, [c.ci_low, c.ci_high], c.reason if c.status == "flagged" else "", db)[
        "note"
    ]


def choose_winner(
    kernel: rq.KernelRecord, approved_only: bool, db: Database | None = None
) -> tuple[rq.CandidateRecord | None, str]:
    """The best shippable candidate of a kernel, or None with the reason there is none (naming the candidate that
    waits for review and the exact `review approve` command, when one does)."""
    eligible = [c for c in rq.reviewable(kernel) if may_ship(c, approved_only)]
    if eligible:
        return eligible[0], ""
    interpreted = [c for c in kernel.candidates if c.interpreted and c.status in ("correct", "faster", "flagged")]
    if kernel.status == "needs_gpu" or (interpreted and not rq.reviewable(kernel)):
        return (
            None,
            "verified only under the Triton interpreter: no speedup "
            "was measured (timing needs a GPU), so it is not exported",
        )
    candidates = rq.reviewable(kernel)
    if not candidates:
        return (
            None,
            f"no accepted candidate in this run ({kernel.status}{': ' + kernel.reason if kernel.reason else ''})",
        )
    rejected = [c.id for c in candidates if c.decision and c.decision.decision == "reject"]
    waiting = [c for c in candidates if c.id not in rejected]
    if approved_only:
        if waiting:
            return None, f"no approved candidate (--approved-only): {_awaiting(waiting[0], db)}"
        return (
            None,
            f"no approved candidate (--approved-only); every accepted or flagged candidate was rejected ({rejected})",
        )
    if waiting:  # only flagged ones are left, none approved
        note = _awaiting(waiting[0], db)
        return None, f"not shipped without a human: {note}" + (f" (rejected: {rejected})" if rejected else "")
    return None, f"every accepted or flagged candidate was rejected ({rejected})"


def check_package_name(name: str) -> None:
    if not name.isidentifier() or name.startswith("_") or name.lower() != name:
        raise ExportError(
            f"--name {name!r} must be a lowercase Python identifier (letters, digits, underscores), e.g. my_kernels"
        )


def prepare_folder(out: Path) -> None:
    """Create `out`, or clear a previous export there; never touch a folder that holds anything else."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a folder; pass --out NEW_FOLDER")
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise ExportError(
                f"{out} is not empty and was not written by `kernel-agent export`; pass an empty or new --out folder"
            )
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def _verified_on(candidate: rq.CandidateRecord) -> list[tuple[str, str]]:
    return [(candidate.device, dtype) for dtype in candidate.dtypes]


def _tolerances(candidate: rq.CandidateRecord) -> dict[str, tuple[float, float]]:
    return {dtype: (float(t["rtol"]), float(t["atol"])) for dtype, t in candidate.verdict.get("tolerances", {}).items()}


def _foreign_imports(source: str) -> list[str]:
    """kernel_agent modules the (rewritten) source still imports: those cannot ship."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] == "kernel_agent"]
        elif (
            isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "kernel_agent"
        ):
            found.append(node.module or "")
    return found


def reverify(kernel: rq.KernelRecord, candidate: rq.CandidateRecord, options: EvalOptions) -> tuple[bool, str]:
    """Evaluate the winner again on the problem as it is now; (verified, status or reason)."""
    from kernel_agent.evaluate.pipeline import evaluate
    from kernel_agent.problem.load import ProblemError, load_problem

    try:
        problem = load_problem(kernel.problem_path)
    except ProblemError as exc:
        return False, f"the problem cannot be loaded any more: {exc}"
    options.device = candidate.device or "auto"
    verdict = evaluate(problem, candidate.source or "", options)
    if not verdict.correct:
        return False, f"no longer verifies: {verdict.status}: {verdict.reason}"
    # Correctness is what re-verification is for; the timing phase that follows is reported, not required
    # (a loaded machine can fail its noise checks without the kernel having changed).
    passed, total = (
        sum(1 for c in verdict.checks if c.get("passed")),
        sum(1 for c in verdict.checks if c.get("passed") is not None),
    )
    timing = (
        f"re-timed {verdict.speedup:.2f}x"
        if verdict.speedup and verdict.status in ("faster", "correct", "flagged")
        else f"re-timing {verdict.status}"
    )
    return True, f"{passed}/{total} checks passed; {timing}"


def _exported(kernel: rq.KernelRecord, c: rq.CandidateRecord, source: str, reverified: str) -> files.ExportedKernel:
    return files.ExportedKernel(
        name=files.identifier(kernel.name),
        problem=kernel.name,
        run_id=c.run_id,
        candidate_id=c.id,
        source=source,
        reference_source=kernel.reference_source,
        backend=c.backend,
        verified=_verified_on(c),
        tolerances=_tolerances(c),
        speedup=c.speedup,
        ci=(c.ci_low, c.ci_high),
        baseline_ms=c.baseline_ms,
        candidate_ms=c.candidate_ms,
        device=c.device,
        device_name=c.device_name,
        isolation=c.isolation,
        environment=c.environment,
        date=c.evaluated_at.isoformat(timespec="seconds") if c.evaluated_at else "",
        status=c.status,
        review=c.decision.decision if c.decision else "",
        reverified=reverified,
        kind=kernel.problem_kind,
    )


def select(
    db: Database, run_id: int, approved_only: bool, kernels: list[str] | None, options: EvalOptions, notify: Notify
) -> tuple[list[files.ExportedKernel], list[tuple[str, str]]]:
    """Winners that re-verify, and (kernel, reason) for every kernel left out."""
    records = rq.run_kernels(db, run_id, kernels)
    missing = sorted(set(kernels or []) - {k.name for k in records})
    if missing:
        raise ExportError(
            f"run {run_id} has no kernel {', '.join(missing)}; `kernel-agent runs show {run_id}` lists them"
        )
    chosen, skipped = [], []
    for kernel in records:
        winner, reason = choose_winner(kernel, approved_only, db)
        if winner is None:
            skipped.append((kernel.name, reason))
            continue
        better = rq.awaiting_review(kernel)
        if (
            better is not None
            and better.id != winner.id
            and (better.decision is None or better.decision.decision != "approve")
        ):
            notify(f"{kernel.name}: exporting candidate {winner.id}; a faster one waits: {_awaiting(better, db)}")
        source = files.rewrite_imports(winner.source or "")
        foreign = _foreign_imports(source)
        if foreign:
            skipped.append(
                (kernel.name, f"candidate {winner.id} imports {', '.join(foreign)}, which the package cannot carry")
            )
            continue
        notify(f"re-verifying {kernel.name} (candidate {winner.id}) in the sandbox")
        ok, outcome = reverify(kernel, winner, options)
        if not ok:
            skipped.append((kernel.name, f"candidate {winner.id} {outcome}"))
            continue
        chosen.append(_exported(kernel, winner, source, outcome))
    return chosen, skipped


def write_package(
    out: Path, package: str, run_id: int, kernels: list[files.ExportedKernel], skipped: list[tuple[str, str]]
) -> None:
    prepare_folder(out)
    (out / MARKER).write_text(f"run {run_id}\n")
    files.write_files(out, package, run_id, kernels, skipped)


def export_run(
    db: Database,
    run_id: int,
    out: Path,
    package: str,
    *,
    approved_only: bool = False,
    kernels: list[str] | None = None,
    options: EvalOptions | None = None,
    notify: Notify = lambda message: None,
) -> ExportResult:
    """Choose, re-verify and write; the package is written even when no kernel qualifies (so the
    reasons are on record)."""
    check_package_name(package)
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        prepare_folder(out)  # raises before any slow re-verification
    exported, skipped = select(db, run_id, approved_only, kernels, options or EvalOptions(), notify)
    write_package(out, package, run_id, exported, skipped)
    return ExportResult(out, package, exported, skipped)
