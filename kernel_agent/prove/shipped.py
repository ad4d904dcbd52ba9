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
from kernel_agent.export.seal import METADATA, certificate_path, entries, metadata_sha256, sealed_root


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
    """One line per file of the sealed tree (export/seal.py) that is not the one exported: not in the manifest
    (an added module, a `.pth`, a planted `__pycache__` file), missing, changed, or not a regular file; then
    each certified file against its certificate and, for an hf-kernels variant, metadata.json's digest list
    (what `kernels` itself checks). Read only: nothing of the package is imported."""
    fmt = variant.bundle.format
    root = sealed_root(variant.folder, fmt)
    sealed = variant.bundle.manifest
    if not sealed:
        return [
            f"{variant.folder / FILE_NAME}: no manifest of the package's files (exported before every file was "
            "sealed): export it again"
        ]
    found, odd = entries(root)
    lines = [f"{clean(name, 120)}: not a regular file (a package ships regular files only)" for name in odd]
    own = certificate_path(variant.folder, fmt)
    for name in sorted(set(found) - set(sealed) - {own}):
        lines.append(f"{clean(name, 120)}: {_unsealed(name)}")
    for name in sorted(set(sealed) - set(found)):
        lines.append(f"{clean(name, 120)}: in the certificate's manifest, missing from the package")
    for name in sorted(set(sealed) & set(found)):
        if _digest(found[name], name) != sealed[name]:
            lines.append(f"{clean(name, 120)}: sha256 differs from the certificate's manifest (changed after export)")
    for c in variant.bundle.certificates:
        if not c.files:
            lines.append(f"{c.kernel}: its certificate lists no files")
        for relative, expected in c.files.items():
            path = _inside(variant.folder, relative)
            if path is None or not path.is_file():
                lines.append(f"{clean(relative, 120)}: certified by {c.kernel}'s certificate, missing from the package")
            elif sha256_file(path.read_bytes()) != expected:
                lines.append(f"{relative}: sha256 differs from {c.kernel}'s certificate (changed after export)")
    if fmt == "hf-kernels":
        lines += _metadata_mismatches(variant.folder)
    return lines


def copy_sealed(variant: Variant, dest: Path) -> Path:
    """The folder its users import (pip: the package folder; hf-kernels: the variant folder), copied into `dest`
    from the manifest alone: each file read once, checked against its digest, then written, so what is imported
    is what was checked and nothing the manifest does not list comes along. The copy's path."""
    fmt = variant.bundle.format
    prefix = f"{variant.folder.name}/" if fmt == "pip" else ""
    target = dest / variant.folder.name
    wanted = [name for name in variant.bundle.manifest if name.startswith(prefix)]
    for name in [*wanted, certificate_path(variant.folder, fmt)]:
        source = _inside(sealed_root(variant.folder, fmt), name)
        if source is None or source.is_symlink() or not source.is_file():
            raise PackageError(f"{clean(name, 120)}: in the certificate's manifest, missing from the package")
        data = source.read_bytes()
        expected = variant.bundle.manifest.get(name)
        if name == METADATA:
            try:
                actual = metadata_sha256(json.loads(data))
            except ValueError:
                actual = ""
        else:
            actual = sha256_file(data)
        if expected is not None and actual != expected:
            raise PackageError(f"{clean(name, 120)}: sha256 differs from the certificate's manifest (changed since)")
        path = target / name[len(prefix) :]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return target


def _unsealed(name: str) -> str:
    """Why a file the manifest does not hold is refused, in words a user can act on."""
    if "__pycache__" in Path(name).parts or name.endswith((".pyc", ".pyo")):
        return (
            "bytecode the certificate does not cover (Python could run it instead of the certified source); "
            "delete the __pycache__ folders, Python rebuilds them"
        )
    return "not in the certificate's manifest (added after export; Python could load it)"


def _digest(path: Path, name: str) -> str:
    """A sealed file's digest as the manifest holds it (metadata.json less its digest list)."""
    if name == METADATA:
        try:
            return metadata_sha256(json.loads(path.read_text()))
        except (OSError, ValueError):
            return ""
    return sha256_file(path.read_bytes())


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
    present = {name: p for name, p in entries(folder)[0].items() if name != METADATA}
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
