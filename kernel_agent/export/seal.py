"""The seal over a whole exported package: every file it holds, by sha256, in its certificate file.

Why every file and not only the certified kernels: Python runs whatever the package folder holds when it is
imported (`__init__.py`, the runtime, a planted `__pycache__/*.pyc` that matches its source's timestamp, an
extra module, a data file the kernel reads), so a digest over the kernel, reference and baseline alone leaves
the code that decides what the user's import computes uncovered. `verify-package` and `e2e` refuse a package
with any file that is not in its manifest, missing from it, or not regular, before anything of it runs.

The sealed tree: a pip package's whole export folder (the package, its tests, pyproject.toml); an hf-kernels
variant's folder (what `kernels.get_local_kernel` loads). An hf-kernels variant's metadata.json names the
certificate file in its own digest list, so the manifest holds metadata.json by the hash of its text less that
list (`metadata_sha256`), and the list itself is checked against the files as `kernels` checks it.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

from kernel_agent.core.certificate import FILE_NAME, Bundle, sha256_file

METADATA = "metadata.json"


def sealed_root(variant: Path, fmt: str) -> Path:
    """The folder a variant's manifest covers: the export's root for pip, the variant folder for hf-kernels."""
    return variant.parent if fmt == "pip" else variant


def certificate_path(variant: Path, fmt: str) -> str:
    """The certificate file's own path in the sealed tree (the one file the manifest cannot hold)."""
    return f"{variant.name}/{FILE_NAME}" if fmt == "pip" else FILE_NAME


def entries(root: Path) -> tuple[dict[str, Path], list[str]]:
    """Every regular file under `root` by its relative path, and each entry that is not a regular file or a
    folder (a symlink, a FIFO, a device), without following links."""
    found: dict[str, Path] = {}
    odd: list[str] = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        here = Path(folder)
        for name in sorted(dirs):
            if (here / name).is_symlink():
                odd.append((here / name).relative_to(root).as_posix())
        for name in sorted(names):
            path = here / name
            mode = path.lstat().st_mode
            relative = path.relative_to(root).as_posix()
            if stat.S_ISREG(mode):
                found[relative] = path
            else:
                odd.append(relative)
    return found, sorted(odd)


def metadata_sha256(metadata: dict[str, Any]) -> str:
    """An hf-kernels metadata.json's hash without its digest list (which names the certificate file)."""
    rest = {key: value for key, value in metadata.items() if key != "digest"}
    return sha256_file(json.dumps(rest, sort_keys=True).encode())


def manifest(root: Path, skip: str, metadata: dict[str, Any] | None = None) -> dict[str, str]:
    """sha256 of every regular file under `root` except `skip`; metadata.json (hf-kernels) by `metadata_sha256`."""
    found, odd = entries(root)
    if odd:
        raise ValueError(f"{root}: not a regular file: {', '.join(odd[:3])}")
    digests = {name: sha256_file(path.read_bytes()) for name, path in found.items() if name != skip}
    if metadata is not None:
        digests[METADATA] = metadata_sha256(metadata)
    return dict(sorted(digests.items()))


def seal(variant: Path, fmt: str, metadata: dict[str, Any] | None = None) -> None:
    """Write the manifest of every file into `variant`'s certificate file: the last step of writing a pip package,
    the one before metadata.json for an hf-kernels variant (`metadata` is what it will hold, less its digest)."""
    path = variant / FILE_NAME
    bundle = Bundle.from_json(json.loads(path.read_text()))
    sealed = manifest(sealed_root(variant, fmt), certificate_path(variant, fmt), metadata)
    text = json.dumps(replace(bundle, manifest=sealed).to_json(), indent=2, default=str) + "\n"
    path.write_text(text)
