"""Export a run's winners as an installable package (DESIGN.md section 10).

Why re-verify before writing: the database records what was true when the run
measured it; the problem (its reference, its shapes) may have changed since,
and a package must not ship a kernel that no longer matches its reference.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernel_agent.core.of_record import PENDING, NumberOfRecord
from kernel_agent.core.relative import Relative
from kernel_agent.core.verdict import Status
from kernel_agent.db import review_reads as rq
from kernel_agent.db.evidence import against_torch, certificate
from kernel_agent.db.models import BASELINE, RETIME
from kernel_agent.db.session import Database
from kernel_agent.evaluate.pipeline import EvalOptions
from kernel_agent.export import files as files
from kernel_agent.export.formats import Format
from kernel_agent.export.tuned import TunedConfig, TunedTable
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
    return rq.review_summary(
        c.id, c.speedup, [c.ci_low, c.ci_high], c.reason if c.status == Status.FLAGGED else "", db
    )["note"]


def interpreted_winner(kernel: rq.KernelRecord, approved_only: bool) -> rq.CandidateRecord | None:
    """The candidate a kernel verified only under the Triton interpreter ships (hf-kernels only): the newest
    rewrite that verified, else the baseline itself; never a rejected one, a flagged one only once approved."""

    def allowed(c: rq.CandidateRecord) -> bool:
        decision = c.decision.decision if c.decision else None
        if approved_only or c.status == Status.FLAGGED:
            return decision == "approve"
        return decision != "reject"

    verified = [
        c
        for c in kernel.candidates
        if c.interpreted
        and c.status in (Status.CORRECT, Status.FASTER, Status.FLAGGED)
        and allowed(c)
        and c.origin != RETIME
    ]
    return max(verified, key=lambda c: (c.origin != BASELINE, c.id), default=None)


def choose_winner(
    kernel: rq.KernelRecord, approved_only: bool, db: Database | None = None, allow_interpreted: bool = False
) -> tuple[rq.CandidateRecord | None, str]:
    """The best shippable candidate of a kernel, or None with the reason there is none (naming the candidate that
    waits for review and the exact `review approve` command, when one does). With `allow_interpreted`, a kernel
    verified only under the Triton interpreter ships its verified candidate, marked as never timed."""
    eligible = [c for c in rq.reviewable(kernel) if may_ship(c, approved_only)]
    if eligible:
        return eligible[0], ""
    interpreted = [
        c for c in kernel.candidates if c.interpreted and c.status in (Status.CORRECT, Status.FASTER, Status.FLAGGED)
    ]
    if allow_interpreted and interpreted and all(c.interpreted for c in rq.reviewable(kernel)):
        winner = interpreted_winner(kernel, approved_only)
        if winner is not None:
            return winner, ""
        return (
            None,
            "verified only under the Triton interpreter, and no such candidate may ship (rejected or unapproved)",
        )
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


def check_format_name(name: str, fmt: Format) -> None:
    """A `kernels` name is `^[a-z][-a-z0-9]*[a-z0-9]$` once underscores become dashes (no doubled or trailing ones)."""
    if fmt is Format.HF_KERNELS and not re.fullmatch(r"[a-z]([a-z0-9]|_(?=[a-z0-9]))*[a-z0-9]", name):
        raise ExportError(
            f"--name {name!r}: a --format hf-kernels name is lowercase letters and digits joined by single "
            "underscores, at least two characters, e.g. my_kernels"
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
        if verdict.speedup and verdict.status in (Status.FASTER, Status.CORRECT, Status.FLAGGED)
        else f"re-timing {verdict.status}"
    )
    return True, f"{passed}/{total} checks passed; {timing}"


def plain_run(kernel: rq.KernelRecord, candidate: rq.CandidateRecord, options: EvalOptions) -> str | None:
    """Why the winner may not ship after running it outside the sandbox (export/plain_check.py), or None."""
    from kernel_agent.evaluate.pipeline import run_device
    from kernel_agent.export.plain_check import plain_check
    from kernel_agent.problem.load import ProblemError, load_problem

    try:
        problem = load_problem(kernel.problem_path)
    except ProblemError as exc:
        return f"the problem cannot be loaded any more: {exc}"
    device = run_device(problem, candidate.device or "auto")
    return plain_check(problem, candidate.source or "", device, options.timeout)


def tuned_tables(db: Database, kernel: rq.KernelRecord, c: rq.CandidateRecord) -> list[TunedTable]:
    """The winner's per-shape config table on the device it was verified on, from the rows `kernel-agent tune`
    stored: its own source's rows, else the problem baseline's when the winner sets the same tunables (a search
    candidate is the baseline with other values). Its default is the winner's own config. None tuned: []."""
    from kernel_agent.core.fingerprint import environment_key
    from kernel_agent.db.models import ProblemRow
    from kernel_agent.db.tuning import tuned_variants
    from kernel_agent.db.writes import sha256
    from kernel_agent.propose.tunables import TunableError, read_config
    from kernel_agent.select.table import tuned_configs

    if not c.environment or c.interpreted:
        return []
    with db.session() as session:
        problem = session.get(ProblemRow, c.problem_id)
        digest = problem.content_hash if problem is not None else ""
    here = [k for k in tuned_variants(db, digest) if k.fingerprint == environment_key(c.environment)] if digest else []
    for variant in (sha256(c.source or ""), sha256(kernel.baseline_source)):
        key = next((k for k in here if k.variant_hash == variant), None)
        if key is None:
            continue
        best = tuned_configs(db, key, files.shape_names(kernel.reference_source))
        if not best:
            continue
        try:
            default = read_config(c.source or "", list(best[0].config))
        except TunableError:
            continue  # a rewrite that no longer declares the tuned names: the table is not its own
        return [TunedTable(c.device_name, default, [TunedConfig(t.shape, t.config) for t in best])]
    return []


def losses(k: files.ExportedKernel) -> list[str]:
    """One line per reference the kernel loses to on its device (the whole interval below 1)."""
    return [
        f"{k.name} loses to torch {kind} on {k.device} ({k.device_name}): {r.value:.2f}x "
        f"[{r.ci[0]:.2f}, {r.ci[1]:.2f}]; torch {kind} is faster there"
        for kind, r in k.vs.items()
        if r.value is not None and r.ci is not None and r.ci[1] < 1.0
    ]


def _exported(
    kernel: rq.KernelRecord,
    c: rq.CandidateRecord,
    number: NumberOfRecord,
    source: str,
    reverified: str,
    vs: dict[str, Relative],
) -> files.ExportedKernel:
    """The winner `c` as it ships, quoting its number of record (core/of_record.py: its re-timing with every
    round once that superseded the early look); the source shipped is always `c`'s."""
    quoted = number.quoted
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
        speedup=number.speedup,
        ci=number.ci or (None, None),
        baseline_ms=quoted.baseline_ms if quoted else None,
        candidate_ms=quoted.candidate_ms if quoted else None,
        device=c.device,
        device_name=c.device_name,
        isolation=c.isolation,
        environment=c.environment,
        date=c.evaluated_at.isoformat(timespec="seconds") if c.evaluated_at else "",
        status=c.status,
        review=c.decision.decision if c.decision else "",
        reverified=reverified,
        kind=kernel.problem_kind,
        interpreted=c.interpreted,
        vs=vs,
        record_candidate=number.candidate,
        pending=PENDING if number.withheld else "",
    )


def select(
    db: Database,
    run_id: int,
    approved_only: bool,
    kernels: list[str] | None,
    options: EvalOptions,
    notify: Notify,
    allow_interpreted: bool = False,
) -> tuple[list[files.ExportedKernel], list[tuple[str, str]]]:
    """Winners that re-verify, and (kernel, reason) for every kernel left out."""
    records = rq.run_kernels(db, run_id, kernels)
    missing = sorted(set(kernels or []) - {k.name for k in records})
    if missing:
        raise ExportError(
            f"run {run_id} has no kernel {', '.join(missing)}; `kernel-agent runs show {run_id}` lists them"
        )
    chosen, skipped = [], []
    several = len({k.device for k in records}) > 1  # a run with --device cpu,cuda: a reason names its device
    for kernel in records:
        winner, reason = choose_winner(kernel, approved_only, db, allow_interpreted)
        if winner is None:
            skipped.append((kernel.name, f"on {kernel.device}: {reason}" if several else reason))
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
        notify(f"running {kernel.name} (candidate {winner.id}) once more in a plain process, as its users will")
        refused = plain_run(kernel, winner, options)
        if refused:
            skipped.append((kernel.name, f"candidate {winner.id} {refused}"))
            continue
        number = kernel.number_of(winner)
        vs = against_torch(db, winner, number)
        exported = _exported(kernel, winner, number, source, outcome, vs)
        exported.baseline_source = kernel.baseline_source
        exported.evidence = certificate(db, kernel, winner, vs)
        exported.tuned = tuned_tables(db, kernel, winner)
        if exported.tuned:
            notify(f"{kernel.name}: shipping its tuned config table ({len(exported.tuned[0].configs)} shape(s))")
        for line in losses(exported):
            notify(f"warning: {line}")
        chosen.append(exported)
    return chosen, skipped


def merge(chosen: list[files.ExportedKernel], notify: Notify) -> list[files.ExportedKernel]:
    """One winner per (kernel, device) over several runs: the one with the higher speedup (a timed winner beats
    one verified only under the interpreter); the other is named."""
    best: dict[tuple[str, str], files.ExportedKernel] = {}
    for k in chosen:
        key = (k.name, k.device)
        held = best.get(key)
        if held is None:
            best[key] = k
            continue
        keep, drop = (k, held) if (k.speedup or 0.0) > (held.speedup or 0.0) else (held, k)
        notify(
            f"{k.name} on {k.device}: candidate {keep.candidate_id} of run {keep.run_id} kept over "
            f"candidate {drop.candidate_id} of run {drop.run_id} (the higher speedup)"
        )
        best[key] = keep
    return list(best.values())


def one_per_kernel(chosen: list[files.ExportedKernel], notify: Notify) -> list[files.ExportedKernel]:
    """The pip package holds one module per kernel: across devices, the winner with the higher speedup."""
    by_name: dict[str, files.ExportedKernel] = {}
    for k in chosen:
        held = by_name.get(k.name)
        if held is None or (k.speedup or 0.0) > (held.speedup or 0.0):
            if held is not None:
                notify(
                    f"{k.name}: the pip package keeps one device's winner ({k.device}); --format hf-kernels keeps each"
                )
            by_name[k.name] = k
    return list(by_name.values())


def write_package(
    out: Path,
    package: str,
    run_ids: list[int],
    kernels: list[files.ExportedKernel],
    skipped: list[tuple[str, str]],
    fmt: Format = Format.PIP,
    notify: Notify = lambda message: None,
) -> None:
    prepare_folder(out)
    (out / MARKER).write_text(f"run {', '.join(map(str, run_ids))}\n")
    if fmt is Format.HF_KERNELS:
        from kernel_agent.export import hf_kernels

        hf_kernels.write_project(out, package, run_ids, kernels, skipped, notify)
    else:
        files.write_files(out, package, run_ids[0], kernels, skipped)


def export_run(
    db: Database,
    run_id: int | list[int],
    out: Path,
    package: str,
    *,
    approved_only: bool = False,
    kernels: list[str] | None = None,
    options: EvalOptions | None = None,
    notify: Notify = lambda message: None,
    fmt: Format = Format.PIP,
    tuned: dict[str, list[TunedTable]] | None = None,
) -> ExportResult:
    """Choose, re-verify and write; the package is written even when no kernel qualifies (so the
    reasons are on record). Several runs merge: one winner per kernel and device. `tuned` maps a kernel
    to its per-shape config tables (one per device), shipped as the format's tuned-config files."""
    check_package_name(package)
    check_format_name(package, fmt)
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists():
        prepare_folder(out)  # raises before any slow re-verification
    run_ids = [run_id] if isinstance(run_id, int) else list(run_id)
    exported: list[files.ExportedKernel] = []
    skipped: list[tuple[str, str]] = []
    for rid in run_ids:
        found, left = select(
            db, rid, approved_only, kernels, options or EvalOptions(), notify, fmt is Format.HF_KERNELS
        )
        exported += found
        skipped += [(name, reason if len(run_ids) == 1 else f"run {rid}: {reason}") for name, reason in left]
    exported = merge(exported, notify)
    if fmt is Format.PIP:
        exported = one_per_kernel([k for k in exported if not k.interpreted], notify)
    shipped = {k.name for k in exported}
    skipped = [(name, reason) for name, reason in skipped if name not in shipped]
    for k in exported:
        if tuned and k.name in tuned:
            k.tuned = list(tuned[k.name])  # given by the caller: over the stored table
    write_package(out, package, run_ids, exported, skipped, fmt, notify)
    return ExportResult(out, package, exported, skipped)
