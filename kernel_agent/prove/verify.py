"""`verify-package`: a package's certificates measured again here, with the verdict's own protocol.

Why the same pipeline: a re-measured number is only comparable with the certified one when it comes from the same
checks and the same statistics, so each certified kernel is evaluated again by `evaluate()` (sandbox, fresh secret
seeds, A/B timing against the package's own baseline, round-bootstrap interval) on a problem rebuilt from the
package's own reference and baseline. A wrong result is an error; a different speed is reported beside the
certified one, and said to be on another device when it is.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernel_agent.core.certificate import Certificate, sha256_text
from kernel_agent.core.fingerprint import environment_key
from kernel_agent.core.text import clean
from kernel_agent.core.verdict import Verdict
from kernel_agent.evaluate.context import EvalOptions
from kernel_agent.export.files import unshipped
from kernel_agent.prove.loaded import Loaded, call_loaded
from kernel_agent.prove.shipped import PackageError, Shipped, Variant, module_of


@dataclass(frozen=True)
class Sources:
    """What the package ships for one certified kernel, as it was evaluated: each checked against its hash."""

    reference: str
    baseline: str
    candidate: str


@dataclass
class Remeasured:
    """One certificate beside its re-measurement here."""

    variant: str
    certificate: Certificate
    verdict: Verdict
    here: dict[str, Any]  # this machine's environment fingerprint
    notes: list[str] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return self.verdict.passed

    @property
    def same_device(self) -> bool:
        """The same device name, torch version and thread count as the certified verdict (its fingerprint key)."""
        d = self.certificate.device
        certified = {"device_name": d.name, "torch": self.certificate.versions.get("torch"), "threads": d.threads}
        return environment_key(certified) == environment_key(self.here)

    def speed_line(self) -> str:
        """How the re-measured speed stands beside the certified one, in words."""
        mine, theirs = self.verdict.speedup_ci, self.certificate.verdict.ci
        if not self.correct:
            return f"not timed here: {self.verdict.status}: {self.verdict.reason}"
        if self.verdict.speedup is None or not mine:
            return f"no speedup measured here: {self.verdict.reason or self.verdict.status}"
        if theirs is None:
            return "the certificate quotes no interval to compare with"
        overlap = mine[0] <= theirs[1] and theirs[0] <= mine[1]
        where = (
            "same device fingerprint"
            if self.same_device
            else f"a different device here ({self.here.get('device_name')}, {self.here.get('threads')} thread(s), "
            f"torch {self.here.get('torch')}) than certified ({self.certificate.device.name}, "
            f"{self.certificate.device.threads} thread(s), torch {self.certificate.versions.get('torch')})"
        )
        agree = "the intervals overlap" if overlap else "the intervals do not overlap: the speed differs here"
        return f"{where}; {agree}"

    def to_json(self) -> dict[str, Any]:
        c = self.certificate
        return {
            "kernel": c.kernel,
            "variant": self.variant,
            "certified": {"status": c.verdict.status, "speedup": c.verdict.speedup, "ci": c.verdict.ci},
            "remeasured": {
                "status": str(self.verdict.status),
                "speedup": self.verdict.speedup,
                "ci": self.verdict.speedup_ci,
                "per_shape": [e.to_json() for e in self.verdict.timing.per_shape] if self.verdict.timing else [],
                "checks": [sum(1 for x in self.verdict.checks if x.get("passed")), len(self.verdict.checks)],
                "reason": self.verdict.reason,
            },
            "correct": self.correct,
            "same_device": self.same_device,
            "speed": self.speed_line(),
            "notes": self.notes,
        }


def variants_here(shipped: Shipped, device: str) -> list[Variant]:
    """The folders to verify on this machine: the pip package's, or the hf-kernels variant of `device`."""
    if shipped.format == "pip":
        return list(shipped.variants)
    return [v for v in shipped.variants if v.name == device]


def sources(variant: Variant, c: Certificate) -> Sources:
    """The reference, baseline and candidate as they were evaluated, read from the package; a file that is not
    the certified text (by its hash) is a PackageError."""
    found: dict[str, str] = {}
    for prefix, want, label in (
        ("_reference_", c.reference_sha256, "reference"),
        ("_baseline_", c.baseline_sha256, "baseline"),
        ("_kernel_", c.candidate_sha256, "kernel"),
    ):
        relative = module_of(c, prefix + c.kernel)
        if relative is None:
            raise PackageError(f"{c.kernel}: its certificate names no {label} module")
        text = (variant.folder / relative).read_text()
        source = unshipped(text) if label == "kernel" else _without_header(text)
        if source is None or sha256_text(source) != want:
            raise PackageError(f"{relative}: its source is not the certified {label} (sha256 differs)")
        found[label] = source
    return Sources(found["reference"], found["baseline"], found["kernel"])


def _without_header(text: str) -> str | None:
    head, _, rest = text.partition("\n")
    if not head.startswith("# "):
        return None
    from kernel_agent.export.files import restore_imports

    return restore_imports(rest)


def problem_folder(work: Path, c: Certificate, found: Sources) -> Path:
    """The problem rebuilt from the package: a native folder (problem.py + kernel.py), or the KernelBench file."""
    if c.kind == "kernelbench":
        path = work / f"{_safe(c.problem)}.py"
        path.write_text(found.reference)
        return path
    folder = work / _safe(c.problem)
    folder.mkdir()
    (folder / "problem.py").write_text(found.reference)
    (folder / "kernel.py").write_text(found.baseline)
    return folder


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)[:80] or "problem"


@dataclass
class Verified:
    """One folder of a package verified here: each certificate re-measured, and each kernel through the loader."""

    variant: str
    remeasured: list[Remeasured]
    loaded: list[Loaded]

    @property
    def correct(self) -> bool:
        return all(r.correct for r in self.remeasured) and all(x.wrong is None for x in self.loaded)


def verify_variant(shipped: Shipped, variant: Variant, options: EvalOptions, timeout: float) -> Verified:
    """Every certificate of `variant` evaluated again here against the package's own reference and baseline, then
    the package loaded as its users load it and each certified kernel called on fresh check inputs."""
    from kernel_agent.core.fingerprint import fingerprint
    from kernel_agent.evaluate.pipeline import evaluate, run_device
    from kernel_agent.problem.load import ProblemError, load_problem

    remeasured, problems = [], {}
    with tempfile.TemporaryDirectory(prefix="kernel-agent-verify-") as folder:
        for c in variant.bundle.certificates:
            found = sources(variant, c)
            try:
                problem = load_problem(problem_folder(Path(folder), c, found))
            except ProblemError as exc:
                raise PackageError(f"{c.kernel}: the package's reference does not load: {clean(exc, 300)}") from None
            device = run_device(problem, c.device.type or "auto")
            options.device = device
            verdict = evaluate(problem, found.candidate, options)
            remeasured.append(Remeasured(variant.name, c, verdict, fingerprint(device, options.threads or 1)))
            if c.kind == "native":
                problems[c.kernel] = (problem, device)
        loaded = call_loaded(variant, problems, timeout) if problems else []
    return Verified(variant.name, remeasured, loaded)
