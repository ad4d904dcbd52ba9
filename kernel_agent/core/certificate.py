"""A verdict certificate: the evidence behind one shipped kernel, in the package that ships it (DESIGN.md section 17).

Why in the package: a number in BENCHMARKS.md is a claim; the verdict behind it (which problem, which source,
which checks, which statistics, which machine, which review) otherwise stays in the exporter's `runs.db`. The
certificate carries it as JSON with a schema version, `verify-package` re-measures it on another machine, and
the file digests in it let a consumer refuse a kernel file changed after export. What a digest does not do: it
is not a signature. Whoever edits the package can edit the certificate to match (docs/THREATS.md §4.9).

Pure records: the database builds one (db/evidence.py), export adds the shipped files' digests and writes it,
`verify-package` and the report read it back through `Certificate.from_json`, which refuses what it does not know.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA = "kernel-agent.certificate"
SCHEMA_VERSION = 1
FILE_NAME = "certificate.json"  # next to metadata.json in each hf-kernels variant; in the pip package's folder
# The check inputs are drawn from fresh secret seeds per evaluation and never leave the orchestrator (THREATS §3.3):
# a certificate records how many were drawn per shape, never their values, and a re-measurement draws its own.
SEEDS_NOTE = "drawn from secrets.randbits(62) per evaluation and never stored; a re-measurement draws fresh ones"


class CertificateError(ValueError):
    """A certificate that cannot be read: one line."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def sha256_file(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class ShapeSpeedup:
    """One benchmark shape of the number of record: its speedup over the baseline, interval, medians."""

    shape: list[int]
    dtype: str
    speedup: float
    ci: list[float] | None
    baseline_ms: float | None
    candidate_ms: float | None


@dataclass(frozen=True)
class Against:
    """The kernel against a torch reference on its device (eager, compile), or why there is no number."""

    value: float | None
    ci: list[float] | None
    reason: str = ""


@dataclass(frozen=True)
class VerdictPart:
    """The verdict the number comes from: the winner's own evaluation, or its re-timing with every round."""

    status: str
    reason: str
    speedup: float | None
    ci: list[float] | None
    ci_level: str
    rounds: int | None
    record_candidate: int | None
    pending: str  # "re-timing" while an early look too wide to quote waits for its re-timing
    per_shape: list[ShapeSpeedup] = field(default_factory=list)
    against: dict[str, Against] = field(default_factory=dict)  # "eager", "compile"


@dataclass(frozen=True)
class Checks:
    """What the correctness checks covered (the values of the seeds are not evidence anyone can reuse)."""

    passed: int
    total: int
    shapes: list[list[int]]
    benchmark_shapes: list[list[int]]
    dtypes: list[str]
    distributions: list[str]
    cases_per_shape: dict[str, int]  # "[3, 17] float32" -> cases drawn
    tolerances: dict[str, dict[str, Any]]  # dtype -> rtol, atol, norm (and the declared ones when widened)
    seeds: str = SEEDS_NOTE


@dataclass(frozen=True)
class Device:
    """Where the verdict was measured; fields the evaluation did not record are None."""

    type: str
    name: str
    driver: str | None
    clock_mhz: float | None
    threads: int | None
    platform: str | None


@dataclass(frozen=True)
class Review:
    """The static scan's findings and flags, and the human decision on the candidate (None: not reviewed)."""

    findings: list[dict[str, Any]]
    flags: list[str]
    decision: str | None
    reviewer: str | None
    note: str | None


@dataclass(frozen=True)
class Origin:
    """What proposed the source: the provider and, for an LLM, its model and the hashes of what it was sent."""

    provider: str
    origin: str  # seed, search, openai, replay, baseline
    model: str | None
    base_url: str | None
    prompt_sha256: str | None  # the rendered request's hash (the reply cache key)
    templates: dict[str, str] | None  # template name -> sha256, when the run recorded them
    templates_note: str = ""


@dataclass(frozen=True)
class Certificate:
    """One shipped kernel in one variant: where it came from, what was checked, what was measured, what ships."""

    kernel: str
    problem: str
    kind: str  # native or kernelbench
    backend: str
    variant: str  # the hf-kernels variant (cpu, cuda, rocm) or "pip"
    run_id: int
    candidate_id: int
    problem_hash: str  # the database's content hash: reference and baseline
    reference_sha256: str
    baseline_sha256: str
    candidate_sha256: str  # the candidate's source as evaluated (before the package's import rewrite)
    diff_vs_baseline: str
    verdict: VerdictPart
    checks: Checks
    isolation: str
    device: Device
    versions: dict[str, str | None]  # torch, triton, cuda, python, kernel_agent, compiler
    review: Review
    origin: Origin
    evaluated_at: str
    files: dict[str, str] = field(default_factory=dict)  # path relative to the variant or package -> sha256
    # Left for the resolution work (another issue): how the verdict was resolved or classified. Optional; absent
    # until that lands, and never filled with a guess.
    resolution: dict[str, Any] | None = None
    schema: str = SCHEMA
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def with_files(self, files: dict[str, str], variant: str) -> Certificate:
        from dataclasses import replace

        return replace(self, files=dict(sorted(files.items())), variant=variant)

    @classmethod
    def from_json(cls, data: Any) -> Certificate:
        """Decode a certificate strictly: a wrong schema, a newer version, an unknown or missing field is refused
        (the file comes from a package, not from this process)."""
        if not isinstance(data, dict):
            raise CertificateError("a certificate must be a JSON object")
        if data.get("schema") != SCHEMA:
            raise CertificateError(f"not a kernel-agent certificate (schema {str(data.get('schema'))[:60]!r})")
        version = data.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
            raise CertificateError(f"certificate schema version {str(version)[:20]} is not one this kernel-agent reads")
        try:
            return _decode(cls, data)
        except (TypeError, ValueError, KeyError) as exc:
            raise CertificateError(f"malformed certificate: {str(exc)[:200]}") from None


_NESTED: dict[str, type] = {  # Certificate's own record fields (Origin.origin is text, not one of these)
    "verdict": VerdictPart,
    "checks": Checks,
    "device": Device,
    "review": Review,
    "origin": Origin,
}


def _decode(kind: type, data: dict[str, Any]) -> Any:
    fields = kind.__dataclass_fields__
    unknown = set(data) - set(fields)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))[:100]}")
    values: dict[str, Any] = {}
    for name, value in data.items():
        if kind is Certificate and name in _NESTED:
            if not isinstance(value, dict):
                raise TypeError(f"{name} must be an object")
            value = _decode(_NESTED[name], value)
        elif kind is VerdictPart and name == "per_shape":
            value = [_decode(ShapeSpeedup, v) for v in _list(value, name)]
        elif kind is VerdictPart and name == "against":
            value = {str(k): _decode(Against, v) for k, v in _dict(value, name).items()}
        elif name == "files":
            value = {str(k): str(v) for k, v in _dict(value, name).items()}
        values[name] = value
    _check_types(kind, values)
    return kind(**values)


def _list(value: Any, name: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"{name} must be a list")
    return value


def _dict(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{name} must be an object")
    return value


_NUMBER = (int, float)
_SCALARS: dict[str, tuple[type, ...]] = {  # the fields verify-package computes with, checked before it does
    "run_id": (int,),
    "candidate_id": (int,),
    "speedup": (*_NUMBER, type(None)),
    "kernel": (str,),
    "problem": (str,),
    "kind": (str,),
    "candidate_sha256": (str,),
    "baseline_sha256": (str,),
    "reference_sha256": (str,),
    "status": (str,),
    "threads": (int, type(None)),
}


def _check_types(kind: type, values: dict[str, Any]) -> None:
    for name, value in values.items():
        allowed = _SCALARS.get(name)
        if allowed and (not isinstance(value, allowed) or isinstance(value, bool)):
            raise TypeError(f"{kind.__name__}.{name} has the wrong type ({type(value).__name__})")


BUNDLE_SCHEMA = "kernel-agent.certificates"


@dataclass(frozen=True)
class Bundle:
    """The certificate file of one pip package or one hf-kernels variant: a certificate per shipped kernel."""

    package: str
    format: str  # pip or hf-kernels
    variant: str  # pip, or the hf-kernels variant's backend
    certificates: list[Certificate]
    # Every other file Python could load from this package, path -> sha256: for pip relative to the export's root
    # (the package, its tests, pyproject.toml), for an hf-kernels variant relative to the variant's folder (its
    # metadata.json by the hash of its text less its digest list, which names this file). Empty: the package was
    # exported before whole packages were sealed, and is refused.
    manifest: dict[str, str] = field(default_factory=dict)
    schema: str = BUNDLE_SCHEMA
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Bundle:
        if not isinstance(data, dict) or data.get("schema") != BUNDLE_SCHEMA:
            raise CertificateError("not a kernel-agent certificate file")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise CertificateError(f"certificate file version {str(data.get('schema_version'))[:20]} is not readable")
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise CertificateError(f"unknown certificate file field(s): {', '.join(sorted(unknown))[:100]}")
        certificates = data.get("certificates")
        if not isinstance(certificates, list):
            raise CertificateError("the certificate file holds no list of certificates")
        values = [data.get(name) for name in ("package", "format", "variant")]
        if not all(isinstance(v, str) for v in values):
            raise CertificateError("the certificate file's package, format and variant must be text")
        manifest = data.get("manifest", {})
        if not isinstance(manifest, dict) or not all(isinstance(v, str) for v in manifest.values()):
            raise CertificateError("the certificate file's manifest must map paths to sha256 digests")
        return cls(*values, [Certificate.from_json(c) for c in certificates], {str(k): v for k, v in manifest.items()})
