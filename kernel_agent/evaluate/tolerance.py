"""The tolerance a problem is checked with: the declared one, widened to cover its own reference's error.

A reference computed in float32 is itself off the float64 gold; where it cancels (a large shift taken
back off, a difference of near-equal terms), by more than a tight declared `atol` on some draws. Its own
baseline then fails its check (`baseline_failed`, and a whole `optimize` finds nothing), and so does every
honest kernel with the reference's numerics. So, once per problem and dtype in a process, the reference's
own elementwise excess over the declared rule and its normwise error are measured on a few draws of each
shape worth checking; where either passes the declared tolerance, it is raised to twice what the
reference itself showed (an honest kernel rounds elsewhere, not worse). The precision rule (error no more
than twice the same-dtype reference's) is untouched, so a kernel computing in a lower precision still fails.

The measurement costs 1-2 s on this machine's examples, so what it found is kept in the user's cache,
keyed by the problem file's bytes, dtype, device and torch version: a one-shot `eval` pays it once per
problem, not once per call. A cached entry is only read back as two non-negative finite errors, and the
rule above is applied to them again (THREATS row 16 says who can write the user's cache).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import torch

from kernel_agent.core.comparison import Tolerance
from kernel_agent.problem.load import Problem
from kernel_agent.problem.oracle import CaseMaker, fresh_seed

DRAWS = 3  # per shape (one for a shape past SMALL_ELEMENTS: its worst element is already an extreme of many)
SMALL_ELEMENTS = 1 << 16
MARGIN = 2.0  # x the reference's own worst error
MEASURE_BYTES = 256 << 20  # a shape whose inputs and outputs pass this is not measured (its float64 costs seconds)


@dataclass(frozen=True)
class Checked:
    """The tolerance in force for one dtype, and why it differs from the declared one (empty if it does not)."""

    tolerance: Tolerance
    widened: str = ""

    def to_json(self, declared: Tolerance) -> dict:
        record = {"rtol": self.tolerance.rtol, "atol": self.tolerance.atol, "norm": self.tolerance.norm}
        if self.widened:
            record |= {"declared": vars(declared), "widened": self.widened}
        return record


_CACHE: dict[tuple, Checked] = {}
_LOCK = threading.Lock()


def checked_tolerance(problem: Problem, dtype: str, device: str) -> Checked:
    """The tolerance checks and audits use for `dtype` (measured once per problem file, dtype and device)."""
    key = (str(problem.module_path), problem.module_path.stat().st_mtime, _measured_on(problem), dtype, device)
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = _decided(problem, dtype, _reference_error(problem, dtype, device))
        return _CACHE[key]


def _measured_on(problem: Problem) -> str:
    """What the measurement draws besides the file: the shapes (a caller may pass the problem with other
    check shapes, as the reference points do) and the distribution."""
    return f"{problem.all_check_shapes()}|{problem.distributions[0]}"


def cache_dir() -> Path:
    """Beside the build store: the user's cache, or $KERNEL_AGENT_TOLERANCE_CACHE."""
    chosen = os.environ.get("KERNEL_AGENT_TOLERANCE_CACHE")
    if chosen:
        return Path(chosen)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kernel-agent" / "tolerances"


def _cache_file(problem: Problem, dtype: str, device: str) -> Path:
    digest = hashlib.sha256(problem.module_path.read_bytes())
    digest.update(f"\0{_measured_on(problem)}\0{dtype}\0{device}\0{torch.__version__}".encode())
    digest.update(f"\0{DRAWS}/{SMALL_ELEMENTS}/{MEASURE_BYTES}/finite-elements".encode())
    return cache_dir() / f"{digest.hexdigest()}.json"


def _reference_error(problem: Problem, dtype: str, device: str) -> tuple[float, float]:
    """The reference's worst elementwise excess past rtol and its worst relative norm error: from the cache
    when a sound entry is there, else measured and stored."""
    path = _cache_file(problem, dtype, device)
    try:
        stored = json.loads(path.read_text())
        excess, norm = float(stored["excess"]), float(stored["norm"])
        if all(math.isfinite(v) and v >= 0 for v in (excess, norm)):
            return excess, norm
    except (OSError, ValueError, KeyError, TypeError):
        pass
    excess, norm = _measure(problem, dtype, device)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
            json.dump({"excess": excess, "norm": norm, "problem": problem.name, "dtype": dtype}, out)
        os.replace(out.name, path)
    except OSError:
        pass  # a read-only cache costs the measurement again next time, nothing else
    return excess, norm


def _measure(problem: Problem, dtype: str, device: str) -> tuple[float, float]:
    rtol = problem.tolerances[dtype][0]
    maker = CaseMaker(problem, device)
    excess = norm = 0.0
    for shape in problem.all_check_shapes():
        elements = math.prod(shape)
        for _ in range(DRAWS if elements <= SMALL_ELEMENTS else 1):
            inputs = maker.inputs(shape, dtype, problem.distributions[0], fresh_seed())
            if sum(t.numel() * t.element_size() for t in inputs) * 3 > MEASURE_BYTES:
                break
            gold, base = maker.reference(inputs)
            for g, b in zip(gold, base):
                if not (g.is_floating_point() and g.numel()):
                    continue
                g64, b64 = g.double(), b.double()
                finite = torch.isfinite(g64) & torch.isfinite(b64)
                if not bool(finite.any()):
                    continue
                # Element-wise: where the reference overflowed its error is infinite and says nothing about the
                # rounding an honest kernel needs room for (the comparison judges those elements on the gold).
                g64, error = g64[finite], (b64[finite] - g64[finite]).abs()
                excess = max(excess, float((error - rtol * g64.abs()).max()))
                scale = float(torch.linalg.vector_norm(g64))
                if scale > 0:
                    norm = max(norm, float(torch.linalg.vector_norm(error)) / scale)
    return excess, norm


def _decided(problem: Problem, dtype: str, errors: tuple[float, float]) -> Checked:
    """The declared tolerance, raised to MARGIN times the reference's own errors where they pass it."""
    excess, norm = errors
    rtol, atol = problem.tolerances[dtype]
    declared = Tolerance(rtol, atol, problem.norm_tolerances[dtype])
    raised_atol, raised_norm = max(atol, MARGIN * excess), max(declared.norm, MARGIN * norm)
    if raised_atol == atol and raised_norm == declared.norm:
        return Checked(declared)
    said = []
    if raised_atol > atol:
        said.append(f"atol {atol:g} -> {raised_atol:.3g} (its worst element is {excess:.3g} past rtol)")
    if raised_norm > declared.norm:
        said.append(f"norm {declared.norm:g} -> {raised_norm:.3g} (its relative norm error {norm:.3g})")
    reason = (
        f"the {dtype} reference itself is off the float64 gold by more than the declared tolerance "
        f"(up to {DRAWS} draws of each check shape): {'; '.join(said)}"
    )
    return Checked(Tolerance(rtol, raised_atol, raised_norm), reason)
