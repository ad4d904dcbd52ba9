"""What an exported package holds, read without importing any of it: its format, its variant folders, each
folder's certificates, and whether every certified file is still the one that was exported.

Why first and apart: everything `verify-package` and `e2e` do runs code from the package, so a file changed
after export is refused before anything runs. The digests prove a file was not changed without its certificate;
they do not prove who wrote the certificate (docs/THREATS.md §4.9).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_agent.core.certificate import FILE_NAME, Bundle, Certificate, CertificateError, sha256_file
from kernel_agent.core.text import clean

METADATA = "metadata.json"


class PackageError(ValueError):
    """A package that cannot be read or was changed after export: one line, nothing of it run."""


@dataclass(frozen=True)
class Variant:
    """One folder with a certificate file: the pip package's folder, or an hf-kernels build variant."""

    folder: Path
    bundle: Bundle

    @property
    def name(self) -> str:
        return self.bundle.variant


@dataclass(frozen=True)
class Shipped:
    """An exported package: its root, its format (pip or hf-kernels), its name and its certified folders."""

    root: Path
    format: str
    package: str
    variants: list[Variant]

    def certified(self) -> list[tuple[Variant, Certificate]]:
        return [(v, c) for v in self.variants for c in v.bundle.certificates]


def _bundle(path: Path) -> Bundle:
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PackageError(f"{path}: not readable JSON ({clean(exc, 200)})") from None
    try:
        return Bundle.from_json(data)
    except CertificateError as exc:
        raise PackageError(f"{path}: {clean(exc, 300)}") from None


def open_package(root: Path) -> Shipped:
    """The package at `root` (the folder `export --out` wrote), or a one-line reason it is not one."""
    if not root.is_dir():
        raise PackageError(f"{root} is not a folder; pass the folder `kernel-agent export --out` wrote")
    variants = sorted((root / "build").glob(f"torch-*/{FILE_NAME}"))
    fmt = "hf-kernels"
    if not variants:
        variants = sorted(p for p in root.glob(f"*/{FILE_NAME}") if p.parent.name not in ("tests", "build"))
        fmt = "pip"
    if not variants:
        raise PackageError(
            f"{root} holds no {FILE_NAME} (build/torch-*/ or <package>/): not a package exported with certificates"
        )
    found = [Variant(p.parent, _bundle(p)) for p in variants]
    for v in found:
        if v.bundle.format != fmt:
            raise PackageError(f"{v.folder / FILE_NAME} says format {v.bundle.format!r}; the layout is {fmt}")
    return Shipped(root, fmt, found[0].bundle.package, found)


def tampered(variant: Variant) -> list[str]:
    """One line per certified file that is missing or whose sha256 is not its certificate's; for an hf-kernels
    variant, also each file whose digest in metadata.json does not match (what `kernels` itself checks)."""
    lines = []
    for c in variant.bundle.certificates:
        if not c.files:
            lines.append(f"{c.kernel}: its certificate lists no files")
        for relative, expected in c.files.items():
            path = _inside(variant.folder, relative)
            if path is None or not path.is_file():
                lines.append(f"{clean(relative, 120)}: certified by {c.kernel}'s certificate, missing from the package")
            elif sha256_file(path.read_bytes()) != expected:
                lines.append(f"{relative}: sha256 differs from {c.kernel}'s certificate (changed after export)")
    if (variant.folder / METADATA).is_file():
        lines += _metadata_mismatches(variant.folder)
    return lines


def _inside(folder: Path, relative: str) -> Path | None:
    """`folder / relative` when it stays inside `folder` (a certificate's path is not trusted)."""
    path = (folder / relative).resolve()
    return path if path.is_relative_to(folder.resolve()) else None


def _metadata_mismatches(folder: Path) -> list[str]:
    try:
        metadata: dict[str, Any] = json.loads((folder / METADATA).read_text())
        listed = dict(metadata["digest"]["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return [f"{folder / METADATA}: no digest of its files"]
    present = {
        p.relative_to(folder).as_posix(): p
        for p in folder.rglob("*")
        if p.is_file() and p.name != METADATA and "__pycache__" not in p.parts
    }
    lines = [f"{name}: in the variant, not in metadata.json's digest" for name in sorted(set(present) - set(listed))]
    lines += [f"{clean(name, 120)}: in metadata.json's digest, missing" for name in sorted(set(listed) - set(present))]
    for name in sorted(set(present) & set(listed)):
        digest = base64.b64encode(hashlib.sha256(present[name].read_bytes()).digest()).decode()
        if digest != listed[name]:
            lines.append(f"{name}: sha256 differs from metadata.json's digest (changed after export)")
    return lines


def module_of(c: Certificate, prefix: str) -> str | None:
    """The certified file of `c` that is its kernel module (`_kernel_`), reference or baseline (not a tuned
    config's module)."""
    for relative in c.files:
        stem = Path(relative).stem
        if stem.startswith(prefix) and "_config" not in stem[len(prefix + c.kernel) :]:
            return relative
    return None
